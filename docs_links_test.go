package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinks keeps the pages of the documentation joined: every
// relative link of README.md and of docs/*.md names a file of the
// repository (and, with a #fragment, a heading of that page), and every
// docs/*.md page can be reached from README.md by following links.
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"README.md"}, pages...)
	links := map[string][]string{} // page -> the .md pages it links to
	checked := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range mdLinks(string(data)) {
			target, frag, _ := strings.Cut(l.target, "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file := page // a bare #fragment is a heading of this page
			if target != "" {
				file = filepath.Join(filepath.Dir(page), target)
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s:%d: link %q: %s is no file of the repository", page, l.line, l.target, file)
				continue
			}
			if strings.HasSuffix(file, ".md") {
				links[page] = append(links[page], filepath.Clean(file))
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s:%d: link %q: a #fragment of a file that is not a page", page, l.line, l.target)
				continue
			}
			doc, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if anchors := mdAnchors(string(doc)); !slices.Contains(anchors, frag) {
				t.Errorf("%s:%d: link %q: %s has no heading #%s; its headings: %s", page, l.line, l.target, file, frag, strings.Join(anchors, " "))
			}
		}
	}
	if checked < 20 {
		t.Fatalf("found %d relative links in README.md and docs/*.md; the pattern no longer finds them", checked)
	}
	reached := map[string]bool{"README.md": true}
	for queue := []string{"README.md"}; len(queue) > 0; queue = queue[1:] {
		for _, to := range links[queue[0]] {
			if !reached[to] {
				reached[to] = true
				queue = append(queue, to)
			}
		}
	}
	for _, page := range pages {
		if !reached[page] {
			t.Errorf("%s cannot be reached from README.md by its links: link it from README.md or docs/README.md", page)
		}
	}
}

type mdLink struct {
	target string
	line   int
}

var (
	mdLinkRE   = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	mdInlineRE = regexp.MustCompile("`[^`]*`")
)

// mdLinks returns the links [text](target) and images ![alt](target) of a
// markdown page, outside code blocks and code spans.
func mdLinks(doc string) []mdLink {
	var links []mdLink
	inBlock := false
	for i, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			continue
		}
		line = mdInlineRE.ReplaceAllString(line, "``")
		for _, m := range mdLinkRE.FindAllStringSubmatch(line, -1) {
			links = append(links, mdLink{target: m[1], line: i + 1})
		}
	}
	return links
}

// mdAnchors returns the anchors of a page's headings, as GitHub makes
// them: lower case, punctuation dropped, spaces made hyphens, a repeated
// one suffixed -1, -2, ...
func mdAnchors(doc string) []string {
	var anchors []string
	seen := map[string]int{}
	inBlock := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if inBlock || !strings.HasPrefix(line, "#") || !ok {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors = append(anchors, a+"-"+strconv.Itoa(n))
		} else {
			anchors = append(anchors, a)
		}
		seen[a]++
	}
	return anchors
}
