package finalize

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/onceupload/onceupload/internal/telemetry"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// Every Outcome the service declares has the telemetry outcome it should,
// by name, not by its string matching one of telemetry's; an Outcome the
// handler does not know is an error line, never the service's string.
func TestEveryOutcomeHasItsLine(t *testing.T) {
	want := map[upload.Outcome]string{
		upload.OutcomeCompleted: telemetry.OutcomeCompleted,
		upload.OutcomeDuplicate: telemetry.OutcomeDuplicate,
		upload.OutcomeSkipped:   telemetry.OutcomeSkipped,
		upload.OutcomeRejected:  telemetry.OutcomeMismatch,
	}
	declared := declaredOutcomes(t)
	for _, o := range declared {
		w, ok := want[o]
		if !ok {
			t.Errorf("upload declares Outcome %q, which this test does not know: map it in outcomeOf, and here", o)
			continue
		}
		if got := outcomeOf(o, nil); got != w {
			t.Errorf("outcomeOf(%q, nil) = %q, want %q", o, got, w)
		}
	}
	if len(declared) != len(want) {
		t.Errorf("upload declares %d Outcomes (%q), this test knows %d", len(declared), declared, len(want))
	}
	if got := outcomeOf("renamed", nil); got != telemetry.OutcomeError {
		t.Errorf("an Outcome outcomeOf does not know: %q, want %q", got, telemetry.OutcomeError)
	}
	unavailable := fmt.Errorf("finalize: %w", idempotency.ErrUnavailable)
	for _, o := range declared {
		if got := outcomeOf(o, unavailable); got != telemetry.OutcomeUnavailable {
			t.Errorf("outcomeOf(%q, %v) = %q, want %q", o, unavailable, got, telemetry.OutcomeUnavailable)
		}
		if got := outcomeOf(o, errors.New("boom")); got != telemetry.OutcomeError {
			t.Errorf("outcomeOf(%q, boom) = %q, want %q", o, got, telemetry.OutcomeError)
		}
	}
}

// declaredOutcomes are the constants of type Outcome in package upload's
// source (the files its build takes), so that one added there is driven
// through outcomeOf here.
func declaredOutcomes(t *testing.T) []upload.Outcome {
	t.Helper()
	pkg, err := build.ImportDir(filepath.Join("..", "..", "upload"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []upload.Outcome
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			if typ, ok := vs.Type.(*ast.Ident); !ok || typ.Name != "Outcome" {
				return false
			}
			for i, name := range vs.Names {
				var value string
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if ok {
					value, err = strconv.Unquote(lit.Value)
				}
				if !ok || err != nil {
					t.Fatalf("%s: Outcome %s is not a string literal: this test cannot read it", fset.Position(name.Pos()), name.Name)
				}
				out = append(out, upload.Outcome(value))
			}
			return false
		})
	}
	if len(out) == 0 {
		t.Fatal("no Outcome constants found in package upload's source")
	}
	return out
}
