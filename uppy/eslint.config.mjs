// npm run lint: ESLint's recommended rules and typescript-eslint's
// type-checked ones, with the types of tsconfig.test.json (the sources, the
// unit tests, the browser scenario and its application, the scripts and
// this file; the same rules as web/'s), plus a few rules for promise and union mistakes
// that tsc lets through. A file outside that tsconfig is a parse error
// here: add it there.
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import tseslint from "typescript-eslint";

export default defineConfig(
  { ignores: ["dist/", ".test-build/", "test-results/", "node_modules/", "test/app/"] },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { project: "./tsconfig.test.json", tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // node:test's describe() and it() return promises that the runner awaits itself.
      "@typescript-eslint/no-floating-promises": [
        "error",
        { allowForKnownSafeCalls: [{ from: "package", package: "node:test", name: ["describe", "it", "suite", "test"] }] },
      ],
      // An abort signal's reason is typed any; rejecting with it is what fetch does
      // (only-throw-error allows throwing it too).
      "@typescript-eslint/prefer-promise-reject-errors": ["error", { allowThrowingAny: true }],
      // An async method with no await is how a fake or a MemoryStore meets a
      // Promise-returning interface (a throw becomes a rejection); a promise
      // left unawaited is no-floating-promises' to find.
      "@typescript-eslint/require-await": "off",
      // A switch over a union without a default must name every member.
      "@typescript-eslint/switch-exhaustiveness-check": ["error", { considerDefaultExhaustiveForUnions: true }],
      // A promise returned from inside try without await escapes its catch and finally.
      "@typescript-eslint/return-await": ["error", "in-try-catch"],
      // .catch((e) => …) sees unknown, as catch (e) does under strict.
      "@typescript-eslint/use-unknown-in-catch-callback-variable": "error",
      // A @deprecated API (ours or a dependency's) is named, with its replacement, when used.
      "@typescript-eslint/no-deprecated": "error",
      eqeqeq: ["error", "smart"],
    },
  },
  {
    // tsc checks these (checkJs in tsconfig.test.json), names included, with
    // the DOM's and node's declarations.
    files: ["**/*.mjs"],
    rules: { "no-undef": "off" },
  },
);
