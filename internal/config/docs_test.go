package config

import (
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// configDoc is the page that holds the one table of the functions'
// variables, under its "## Configuration" heading.
const configDoc = "../../docs/operating.md"

// docRow is one row of that table.
type docRow struct {
	name     string
	required bool
	def      string // the documented default; "" for an empty one
	readBy   []string
}

var codeSpanRE = regexp.MustCompile("`([^`]*)`")

// readConfigTable parses the first table of configDoc's Configuration
// section: | variable | default | read by | meaning |. A default cell is
// "required", "empty…" (no default), or names the default as its last code
// span (`24h`, or "`IDEMPOTENCY_TTL` in whole days + 1 (`2`)").
func readConfigTable(t *testing.T) map[string]docRow {
	t.Helper()
	text, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "\n## Configuration\n")
	if !ok {
		t.Fatalf("%s has no Configuration section", configDoc)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]docRow{}
	inTable := false
	for line := range strings.SplitSeq(section, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break // the first table only
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if !inTable {
			if len(cells) < 3 || cells[0] != "variable" || cells[1] != "default" || cells[2] != "read by" {
				t.Fatalf("%s: the Configuration table's header is %q, want | variable | default | read by | meaning |", configDoc, line)
			}
			inTable = true
			continue
		}
		if strings.Trim(cells[0], "-: ") == "" {
			continue // the delimiter row
		}
		m := codeSpanRE.FindStringSubmatch(cells[0])
		if m == nil || m[0] != cells[0] {
			t.Errorf("%s: a Configuration row's variable is not one code span: %q", configDoc, cells[0])
			continue
		}
		row := docRow{name: m[1]}
		switch def := cells[1]; {
		case def == "required":
			row.required = true
		case strings.HasPrefix(def, "empty"):
		default:
			spans := codeSpanRE.FindAllStringSubmatch(def, -1)
			if len(spans) == 0 {
				t.Errorf("%s: %s's default %q names no value in a code span", configDoc, row.name, def)
				continue
			}
			row.def = spans[len(spans)-1][1]
		}
		for f := range strings.SplitSeq(cells[2], ",") {
			row.readBy = append(row.readBy, strings.TrimSpace(f))
		}
		if _, dup := rows[row.name]; dup {
			t.Errorf("%s: %s is in the Configuration table twice", configDoc, row.name)
		}
		rows[row.name] = row
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no rows in the Configuration table", configDoc)
	}
	return rows
}

// The Configuration table of docs/operating.md is what internal/config
// reads: every variable a Load function reads is a row and every row is
// read, by exactly the functions the row names; a variable is "required"
// there exactly when loading fails without it; and each documented
// default, set explicitly, loads exactly the configuration that leaving
// the variable unset loads.
func TestConfigurationTableMatchesTheCode(t *testing.T) {
	t.Parallel()
	rows := readConfigTable(t)

	// Who reads what, from the code.
	readers := map[string][]string{}
	for _, s := range sections {
		read := map[string]bool{}
		_ = s.load(func(name string) (string, bool) { read[name] = true; return "", false })
		for _, name := range slices.Sorted(maps.Keys(read)) {
			readers[name] = append(readers[name], s.name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(readers)) {
		row, ok := rows[name]
		if !ok {
			t.Errorf("internal/config reads %s, which the Configuration table of %s does not list", name, configDoc)
			continue
		}
		if got, want := slices.Sorted(slices.Values(row.readBy)), slices.Sorted(slices.Values(readers[name])); !slices.Equal(got, want) {
			t.Errorf("%s: %s is read by %v, the table says %v", configDoc, name, want, got)
		}
	}
	for name := range rows {
		if _, ok := readers[name]; !ok {
			t.Errorf("%s lists %s, which internal/config does not read", configDoc, name)
		}
	}

	// The required ones, and a base environment that sets only them.
	base := map[string]string{}
	for name, row := range rows {
		if row.required {
			base[name] = "x-" + strings.ToLower(name)
		}
	}
	for _, s := range sections {
		load := func(env map[string]string) (any, error) { return loadSection(s.name, env) }
		want, err := load(base)
		if err != nil {
			t.Errorf("the %s section does not load with only the required variables set (%v): %v", s.name, base, err)
			continue
		}
		for name, row := range rows {
			if !slices.Contains(readers[name], s.name) {
				continue
			}
			if row.required {
				env := maps.Clone(base)
				delete(env, name)
				if _, err := load(env); err == nil || !strings.Contains(err.Error(), name) {
					t.Errorf("%s says %s is required, but the %s section loads without it (error %v)", configDoc, name, s.name, err)
				}
				continue
			}
			env := maps.Clone(base)
			env[name] = row.def
			got, err := load(env)
			if err != nil {
				t.Errorf("%s's documented default %q does not load in the %s section: %v", name, row.def, s.name, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s's documented default %q is not its default in the %s section:\n with it: %+v\n unset:   %+v", name, row.def, s.name, got, want)
			}
		}
	}
}

// loadSection loads the named section from env.
func loadSection(name string, env map[string]string) (any, error) {
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	switch name {
	case "presign":
		return LoadPresign(lookup)
	case "finalize":
		return LoadFinalize(lookup)
	case "events":
		return LoadEvents(lookup)
	}
	panic("no section " + name)
}
