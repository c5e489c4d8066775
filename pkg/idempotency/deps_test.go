package idempotency_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/onceupload/onceupload/"

// goTool runs the go command from this package's directory.
func goTool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// pkg/ is a library that stands on its own: adopters cannot import the
// server's internal packages, so nothing under pkg/ depends on one, and no
// documentation of a pkg/ package names one (an alias of an internal type
// would leave its methods documented where adopters cannot read them, and
// its behaviour changeable where no API checker looks).
func TestPkgStandsOnItsOwn(t *testing.T) {
	for _, dep := range strings.Fields(goTool(t, "list", "-deps", "../...")) {
		if strings.HasPrefix(dep, module+"internal/") {
			t.Errorf("a package under pkg/ depends on %s", dep)
		}
	}
	internal := regexp.MustCompile(`\binternal/|onceupload/internal`)
	for _, pkg := range strings.Fields(goTool(t, "list", "../...")) {
		doc := goTool(t, "doc", "-all", pkg)
		for _, line := range strings.Split(doc, "\n") {
			if internal.MatchString(line) {
				t.Errorf("go doc -all %s names an internal package: %s", pkg, strings.TrimSpace(line))
			}
		}
	}
}

// Each store is a package of its own so that a program links only the
// one it uses: nothing but the DynamoDB store links the DynamoDB client,
// and the package that parses Idempotency-Key (which pkg/api, and so the
// upload client, uses) links neither the library nor the server.
func TestProgramsLinkOnlyTheStoreTheyUse(t *testing.T) {
	const dynamoClient = "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	for _, pkg := range []string{".", "./memorystore", "./redisstore", "./recordstore", "./apigateway", "./batch", "./storetest"} {
		for _, dep := range strings.Fields(goTool(t, "list", "-deps", pkg)) {
			if dep == dynamoClient {
				t.Errorf("%s links the DynamoDB client", pkg)
			}
		}
	}
	if deps := goTool(t, "list", "-deps", "./dynamostore"); !strings.Contains(deps, dynamoClient+"\n") {
		t.Errorf("./dynamostore does not link %s: this test's check is looking for the wrong package", dynamoClient)
	}
	for _, dep := range strings.Fields(goTool(t, "list", "-deps", "./keyheader", "../api")) {
		if strings.HasPrefix(dep, module+"internal/") || dep == module+"pkg/idempotency" {
			t.Errorf("pkg/api or keyheader depends on %s", dep)
		}
	}
}
