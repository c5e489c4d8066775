"""Transform a SAM template into CloudFormation with aws-sam-translator,
as `sam deploy` would, and print the result as JSON.

usage: transform.py TEMPLATE PARAMETERS_JSON

CodeUri is replaced by an S3 location (the translator wants one; sam
build and sam package supply it), and the managed policies are resolved
from a fixed table instead of IAM, so no AWS account is needed.
"""
import json
import os
import sys

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class ManagedPolicies:
    def load(self):
        return {
            "AWSLambdaBasicExecutionRole": "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
            "AWSXrayWriteOnlyAccess": "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
            "AWSXRayDaemonWriteAccess": "arn:aws:iam::aws:policy/AWSXRayDaemonWriteAccess",
        }


def main():
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    with open(sys.argv[1]) as f:
        template = yaml_parse(f.read())
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://deployment-bucket/code.zip"
    out = transform(template, json.loads(sys.argv[2]), ManagedPolicies())
    json.dump(out, sys.stdout, indent=1, default=str)


main()
