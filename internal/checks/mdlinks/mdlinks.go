// Package mdlinks checks the links of Markdown files: every relative link
// names a file or folder that exists, and every #anchor names a heading (by
// GitHub's slug) or an explicit <a id>/<a name> of the page it points at.
// Links to this repository on GitHub (https://github.com/onceupload/onceupload/blob/main/…)
// are checked as relative links from the repository's root. Its test runs
// over every tracked *.md file; make lint runs the test.
package mdlinks

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// RepoURL is the prefix of links to this repository's files on GitHub.
const RepoURL = "https://github.com/onceupload/onceupload/"

// Problem is one link that does not resolve.
type Problem struct {
	File string // the Markdown file, relative to the root
	Line int
	Link string
	Why  string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Link, p.Why)
}

var (
	// An inline link or image: ](target) or ](target "title").
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	// A reference definition: [label]: target
	refDef = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	// An HTML link.
	hrefAttr = regexp.MustCompile(`<a\s[^>]*href="([^"]*)"`)
	// An explicit anchor.
	anchorAttr = regexp.MustCompile(`<a\s[^>]*(?:id|name)="([^"]*)"`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	heading    = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	fence      = regexp.MustCompile("^\\s{0,3}(```+|~~~+)")
	// Markdown inside a heading's text that GitHub does not keep in the slug.
	headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag     = regexp.MustCompile(`<[^>]+>`)
)

// Page is what a Markdown file offers links: its anchors.
type Page struct {
	Anchors map[string]bool
}

// lines returns the file's lines outside fenced code blocks, with their
// numbers (from 1).
func lines(text []byte) (out []string, nums []int) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var open string
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := fence.FindStringSubmatch(line); m != nil {
			mark := m[1]
			switch {
			case open == "":
				open = mark
				continue
			case mark[0] == open[0] && len(mark) >= len(open) && strings.TrimSpace(line) == mark:
				open = ""
				continue
			}
		}
		if open != "" {
			continue
		}
		out = append(out, line)
		nums = append(nums, n)
	}
	return out, nums
}

// Slug is GitHub's anchor for a heading's text: lower case, spaces to '-',
// every character but letters, digits, '-' and '_' removed.
func Slug(text string) string {
	text = headingLink.ReplaceAllString(text, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Anchors returns the anchors of a Markdown text: each heading's slug
// (repeats suffixed -1, -2, … as GitHub does) and every <a id> or <a name>.
func Anchors(text []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	ls, _ := lines(text)
	for _, line := range ls {
		for _, m := range anchorAttr.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := Slug(m[2])
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	return anchors
}

// Links returns the link targets of a Markdown text with their lines,
// outside code blocks and code spans.
func Links(text []byte) (targets []string, nums []int) {
	ls, ns := lines(text)
	for i, line := range ls {
		line = codeSpan.ReplaceAllString(line, "``")
		var found []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			found = append(found, m[1])
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			found = append(found, m[1])
		}
		for _, m := range hrefAttr.FindAllStringSubmatch(line, -1) {
			found = append(found, m[1])
		}
		for _, f := range found {
			targets = append(targets, strings.Trim(f, "<>"))
			nums = append(nums, ns[i])
		}
	}
	return targets, nums
}

// Check checks the links of the Markdown files (paths relative to root).
func Check(root string, files []string) ([]Problem, error) {
	anchorsOf := map[string]map[string]bool{}
	anchors := func(rel string) (map[string]bool, error) {
		if a, ok := anchorsOf[rel]; ok {
			return a, nil
		}
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		a := Anchors(text)
		anchorsOf[rel] = a
		return a, nil
	}
	var problems []Problem
	for _, file := range files {
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return nil, err
		}
		targets, nums := Links(text)
		for i, link := range targets {
			bad := func(why string) { problems = append(problems, Problem{file, nums[i], link, why}) }
			target, fromRoot := link, false
			if rest, ok := strings.CutPrefix(link, RepoURL); ok {
				// blob/main/path or tree/main/path
				parts := strings.SplitN(rest, "/", 3)
				if len(parts) < 3 || (parts[0] != "blob" && parts[0] != "tree") || parts[1] != "main" {
					continue
				}
				target, fromRoot = parts[2], true
			} else if u, err := url.Parse(link); err != nil {
				bad("not a URL: " + err.Error())
				continue
			} else if u.Scheme != "" || u.Host != "" || strings.HasPrefix(link, "/") {
				continue // another site, or a root-relative link GitHub resolves differently
			}
			pathPart, anchor, _ := strings.Cut(target, "#")
			pathPart, err := url.PathUnescape(pathPart)
			if err != nil {
				bad("bad escape in path")
				continue
			}
			if i := strings.IndexByte(pathPart, '?'); i >= 0 {
				pathPart = pathPart[:i]
			}
			rel := file
			if pathPart != "" {
				base := filepath.Dir(file)
				if fromRoot {
					base = "."
				}
				rel = filepath.ToSlash(filepath.Clean(filepath.Join(base, filepath.FromSlash(pathPart))))
				if rel == ".." || strings.HasPrefix(rel, "../") {
					bad("points outside the repository")
					continue
				}
				info, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
				if err != nil {
					bad("no such file")
					continue
				}
				if info.IsDir() {
					if anchor != "" {
						bad("an anchor on a folder")
					}
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(rel, ".md") {
				continue
			}
			a, err := anchors(rel)
			if err != nil {
				return nil, err
			}
			if !a[anchor] {
				bad("no heading or anchor #" + anchor + " in " + rel)
			}
		}
	}
	return problems, nil
}
