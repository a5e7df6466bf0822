package config

import "strings"

// A reader of YAML's block structure, for line numbers only (lineIndex):
// block mappings and sequences, nested by indentation, with each key's and
// item's line. Scalars, flow collections ({...}, [...]) and block scalars
// (| and >) are leaves whose content it skips. It reports !ok for what it
// does not follow (explicit "? " keys, tabs in indentation, keys it cannot
// read, inconsistent indentation), so that lineIndex gives no lines rather
// than wrong ones. It runs only on data that already parsed as YAML.

type blockKind int

const (
	blockScalar blockKind = iota
	blockMap
	blockSeq
)

// blockNode is a mapping (entries with keys), a sequence (entries without)
// or a leaf.
type blockNode struct {
	kind    blockKind
	entries []blockEntry
}

type blockEntry struct {
	key   string // mappings only
	line  int    // 1-based line of the key or of the "-"
	value *blockNode
}

// blockLine is one line with content: its number, the column its content
// starts at, and the content without a trailing comment.
type blockLine struct {
	num, indent int
	text        string
}

type blockParser struct {
	lines []blockLine
	i     int
	ok    bool
}

// parseBlocks reads the first document of data.
func parseBlocks(data string) (*blockNode, bool) {
	p := &blockParser{ok: true}
	data = strings.TrimPrefix(data, "\ufeff")
	data = strings.ReplaceAll(data, "\r\n", "\n")
	// Other line breaks (a lone CR, and YAML 1.1's NEL, LS and PS, which
	// yaml.v3 honours): not followed.
	if strings.ContainsAny(data, "\r\u0085\u2028\u2029") {
		return nil, false
	}
	started := false
	for n, raw := range strings.Split(data, "\n") {
		body := strings.TrimLeft(raw, " ")
		indent := len(raw) - len(body)
		if strings.HasPrefix(body, "\t") && strings.TrimSpace(body) != "" {
			return nil, false
		}
		text := trimmed(stripComment(body))
		if text == "" {
			continue
		}
		if indent == 0 && (text == "---" || strings.HasPrefix(text, "--- ") || text == "...") {
			if started {
				break // one document
			}
			if rest := trimmed(strings.TrimPrefix(text, "---")); rest != "" && rest != "..." {
				p.lines = append(p.lines, blockLine{num: n + 1, indent: 4, text: rest})
				started = true
			}
			continue
		}
		if indent == 0 && strings.HasPrefix(text, "%") && !started {
			continue // a directive
		}
		started = true
		p.lines = append(p.lines, blockLine{num: n + 1, indent: indent, text: text})
	}
	if len(p.lines) == 0 {
		return nil, true
	}
	root := p.block(p.lines[0].indent)
	if p.i < len(p.lines) {
		return nil, false
	}
	return root, p.ok
}

func isSeqItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// block reads the mapping or sequence whose lines start at column indent.
func (p *blockParser) block(indent int) *blockNode {
	if isSeqItem(p.lines[p.i].text) {
		return p.seq(indent)
	}
	return p.mapping(indent)
}

func (p *blockParser) mapping(indent int) *blockNode {
	n := &blockNode{kind: blockMap}
	for p.ok && p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent || l.indent == indent && isSeqItem(l.text) {
			break
		}
		if l.indent > indent {
			p.ok = false
			break
		}
		key, rest, ok := splitKey(l.text)
		if !ok {
			p.ok = false
			break
		}
		p.i++
		n.entries = append(n.entries, blockEntry{key: key, line: l.num, value: p.value(indent, rest, true)})
	}
	return n
}

func (p *blockParser) seq(indent int) *blockNode {
	n := &blockNode{kind: blockSeq}
	for p.ok && p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent != indent || !isSeqItem(l.text) {
			if l.indent > indent {
				p.ok = false
			}
			break
		}
		rest := trimmed(strings.TrimPrefix(l.text, "-"))
		e := blockEntry{line: l.num}
		// An item that is itself a mapping or sequence starting on the
		// "-" line ("- key: v", "- - x"): its lines are at the column
		// after the "- ".
		col := l.indent + len(l.text) - len(rest)
		if rest != "" && !strings.HasPrefix(rest, "&") && !strings.HasPrefix(rest, "!") {
			if _, _, isKey := splitKey(rest); isKey || isSeqItem(rest) {
				p.lines[p.i] = blockLine{num: l.num, indent: col, text: rest}
				e.value = p.block(col)
				n.entries = append(n.entries, e)
				continue
			}
		}
		p.i++
		if stripProperties(rest) == "" && p.i < len(p.lines) && p.lines[p.i].indent > indent {
			e.line = p.lines[p.i].num // a block item starts on its first line
		}
		e.value = p.value(indent, rest, false)
		n.entries = append(n.entries, e)
	}
	return n
}

// value reads what follows a key (rest: the text after its colon) or a
// "-" at column indent: a nested block on the next lines, or a leaf whose
// continuation lines are skipped. In a mapping, a sequence may start at
// the key's own column.
func (p *blockParser) value(indent int, rest string, inMap bool) *blockNode {
	rest = stripProperties(rest)
	if rest == "" {
		if p.i < len(p.lines) {
			next := p.lines[p.i]
			if next.indent > indent || inMap && next.indent == indent && isSeqItem(next.text) {
				return p.block(next.indent)
			}
		}
		return &blockNode{}
	}
	// A leaf: a scalar (plain or quoted, maybe over several lines), a
	// flow collection or a block scalar; all its lines are indented more.
	line := p.lines[p.i-1].num
	segs := []flowSeg{{line, rest}}
	for p.i < len(p.lines) && p.lines[p.i].indent > indent {
		segs = append(segs, flowSeg{p.lines[p.i].num, p.lines[p.i].text})
		p.i++
	}
	if rest[0] == '[' || rest[0] == '{' {
		f := newFlowReader(segs)
		n := f.value()
		if !f.ok {
			p.ok = false
		}
		return n
	}
	return &blockNode{}
}

// stripProperties drops an anchor (&a) and a tag (!t) before a value.
func stripProperties(s string) string {
	for s != "" && (s[0] == '&' || s[0] == '!') {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			return ""
		}
		s = trimmed(s[i:])
	}
	return s
}

// splitKey splits "key: rest" (key plain, 'single' or "double" quoted).
func splitKey(text string) (key, rest string, ok bool) {
	if text == "" || strings.ContainsRune("?-[]{}#&*!|>%@`,", rune(text[0])) && !(text[0] == '-' && len(text) > 1 && text[1] != ' ') {
		return "", "", false
	}
	var after string
	switch text[0] {
	case '\'':
		end := 1
		for {
			j := strings.IndexByte(text[end:], '\'')
			if j < 0 {
				return "", "", false
			}
			end += j
			if end+1 < len(text) && text[end+1] == '\'' {
				end += 2
				continue
			}
			break
		}
		key = strings.ReplaceAll(text[1:end], "''", "'")
		after = strings.TrimLeft(text[end+1:], " ")
	case '"':
		j := strings.IndexByte(text[1:], '"')
		if j < 0 || strings.Contains(text[1:1+j], `\`) {
			return "", "", false // escapes: not worth reading here
		}
		key = text[1 : 1+j]
		after = strings.TrimLeft(text[2+j:], " ")
	default:
		i := strings.Index(text, ": ")
		if i < 0 {
			if !strings.HasSuffix(text, ":") {
				return "", "", false
			}
			i = len(text) - 1
		}
		key = trimmed(text[:i])
		after = text[i:]
		if key == "" {
			return "", "", false
		}
	}
	if after != ":" && !strings.HasPrefix(after, ": ") {
		return "", "", false
	}
	return key, trimmed(after[1:]), true
}

// stripComment drops a comment: a # at the start or after a space, outside
// quotes.
func stripComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == 0 && (c == '\'' || c == '"') && (i == 0 || strings.IndexByte(" :-[{,", s[i-1]) >= 0):
			quote = c
		case quote == '"' && c == '\\':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && c == '#' && (i == 0 || s[i-1] == ' '):
			return s[:i]
		}
	}
	return s
}

// flowSeg is one line of a flow collection.
type flowSeg struct {
	line int
	text string
}

// flowReader reads a flow collection ([a, b], {k: v}), nested or over
// several lines, for the lines of its items and keys.
type flowReader struct {
	text  []byte
	lines []int // line of each byte of text
	pos   int
	ok    bool
}

func newFlowReader(segs []flowSeg) *flowReader {
	f := &flowReader{ok: true}
	for _, s := range segs {
		for i := 0; i < len(s.text); i++ {
			f.text = append(f.text, s.text[i])
			f.lines = append(f.lines, s.line)
		}
		f.text = append(f.text, ' ')
		f.lines = append(f.lines, s.line)
	}
	return f
}

func (f *flowReader) skipSpace() {
	for f.pos < len(f.text) && f.text[f.pos] == ' ' {
		f.pos++
	}
}

func (f *flowReader) peek() byte {
	f.skipSpace()
	if f.pos >= len(f.text) {
		f.ok = false
		return 0
	}
	return f.text[f.pos]
}

// value reads a collection or a scalar; scalars are leaves.
func (f *flowReader) value() *blockNode {
	switch f.peek() {
	case '[':
		f.pos++
		n := &blockNode{kind: blockSeq}
		for f.ok && f.peek() != ']' {
			e := blockEntry{line: f.lines[f.pos]}
			if c := f.peek(); c == '[' || c == '{' {
				e.value = f.value()
			} else {
				e.value = &blockNode{}
				v, quoted := f.scalar(false)
				if c := f.peek(); c == ':' || !quoted && (strings.Contains(v, ": ") || strings.HasSuffix(trimmed(v), ":")) {
					f.ok = false // a single-pair mapping in a sequence: not followed
				}
			}
			n.entries = append(n.entries, e)
			if f.peek() == ',' {
				f.pos++
			}
		}
		f.pos++
		return n
	case '{':
		f.pos++
		n := &blockNode{kind: blockMap}
		for f.ok && f.peek() != '}' {
			e := blockEntry{line: f.lines[f.pos]}
			key, quoted := f.scalar(true)
			if !quoted {
				key = trimmed(key)
			}
			e.key = key
			if f.peek() == ':' {
				f.pos++
				if c := f.peek(); c == ',' || c == '}' {
					e.value = &blockNode{}
				} else {
					e.value = f.value()
				}
			}
			n.entries = append(n.entries, e)
			if f.peek() == ',' {
				f.pos++
			}
		}
		f.pos++
		return n
	case 0:
		return &blockNode{}
	}
	f.scalar(false)
	return &blockNode{}
}

// scalar reads a quoted or plain scalar; a plain key ends at ": ", any
// plain scalar at , ] or }.
func (f *flowReader) scalar(key bool) (string, bool) {
	f.skipSpace()
	start := f.pos
	if f.pos < len(f.text) && (f.text[f.pos] == '\'' || f.text[f.pos] == '"') {
		q := f.text[f.pos]
		f.pos++
		var b []byte
		for f.pos < len(f.text) {
			c := f.text[f.pos]
			switch {
			case q == '"' && c == '\\':
				f.ok = false // escapes: not worth reading here
				return "", true
			case c == q && q == '\'' && f.pos+1 < len(f.text) && f.text[f.pos+1] == '\'':
				b = append(b, c)
				f.pos += 2
				continue
			case c == q:
				f.pos++
				return string(b), true
			}
			b = append(b, c)
			f.pos++
		}
		f.ok = false
		return "", true
	}
	for f.pos < len(f.text) {
		c := f.text[f.pos]
		if c == ',' || c == ']' || c == '}' || c == '[' || c == '{' {
			break
		}
		if key && c == ':' && (f.pos+1 == len(f.text) || f.text[f.pos+1] == ' ') {
			break
		}
		f.pos++
	}
	if f.pos == start && f.pos < len(f.text) && (f.text[f.pos] == '[' || f.text[f.pos] == '{') {
		f.ok = false // a collection as a key
	}
	return string(f.text[start:f.pos]), false
}
