package sqlrow

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// markerRE is the line by which a query names the row type of its result.
var markerRE = regexp.MustCompile(`(?m)^[ \t]*--[ \t]*columns:[ \t]*(\S*)[ \t]*$`)

// RowType returns the row type a query names on its "-- columns:" line,
// or "" if it names none.
func RowType(query string) (string, error) {
	ms := markerRE.FindAllStringSubmatch(query, -1)
	switch {
	case len(ms) == 0:
		return "", nil
	case len(ms) > 1:
		return "", errors.New(`more than one "-- columns:" line`)
	}
	t := ms[0][1]
	if _, ok := layouts[t]; !ok {
		return "", fmt.Errorf(`"-- columns: %s" names no row type`, t)
	}
	return t, nil
}

// ResultColumns returns the names of the columns a query's rows have: the
// list of its SELECT, or of the RETURNING of its INSERT, UPDATE or DELETE,
// each by its alias or, for a column reference, the column's name without
// its table's ("e.id" is "id"). Anything else is named by its text, which
// names no column: an expression needs an alias with AS. A query that
// returns no rows has none; one of many statements has those of the one
// statement that returns rows, or an error if more than one do.
//
// It reads the SQL both drivers write, not every SQL there is: a statement
// that returns rows is found by its first SELECT, INSERT, UPDATE or DELETE
// outside parentheses.
func ResultColumns(query string) ([]string, error) {
	toks, err := lex(query)
	if err != nil {
		return nil, err
	}
	var result []string
	for _, stmt := range split(toks, ";") {
		cols := statementColumns(stmt)
		if cols == nil {
			continue
		}
		if result != nil {
			return nil, errors.New("more than one statement returns rows")
		}
		result = cols
	}
	return result, nil
}

// token is a word (a keyword or an identifier, lower case unless it was
// quoted), a literal or a punctuation mark.
type token struct {
	text string
	word bool
}

func (t token) is(kw string) bool { return t.word && t.text == kw }

// lex splits SQL into tokens, leaving out comments.
func lex(q string) ([]token, error) {
	var toks []token
	rs := []rune(q)
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '-' && i+1 < len(rs) && rs[i+1] == '-':
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
		case r == '/' && i+1 < len(rs) && rs[i+1] == '*':
			j := i + 2
			for j+1 < len(rs) && (rs[j] != '*' || rs[j+1] != '/') {
				j++
			}
			if j+1 >= len(rs) {
				return nil, errors.New("unterminated comment")
			}
			i = j + 2
		case r == '\'':
			j := i + 1
			for ; j < len(rs); j++ {
				if rs[j] == '\'' {
					if j+1 < len(rs) && rs[j+1] == '\'' {
						j++
						continue
					}
					break
				}
			}
			if j >= len(rs) {
				return nil, errors.New("unterminated string")
			}
			toks = append(toks, token{text: string(rs[i : j+1])})
			i = j + 1
		case r == '"':
			j := i + 1
			for j < len(rs) && rs[j] != '"' {
				j++
			}
			if j >= len(rs) {
				return nil, errors.New("unterminated quoted identifier")
			}
			toks = append(toks, token{text: string(rs[i+1 : j]), word: true})
			i = j + 1
		case r == '_' || unicode.IsLetter(r):
			j := i
			for j < len(rs) && (rs[j] == '_' || rs[j] == '$' || unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j])) {
				j++
			}
			toks = append(toks, token{text: strings.ToLower(string(rs[i:j])), word: true})
			i = j
		case unicode.IsDigit(r):
			j := i
			for j < len(rs) && (unicode.IsDigit(rs[j]) || rs[j] == '.') {
				j++
			}
			toks = append(toks, token{text: string(rs[i:j])})
			i = j
		case r == ':' && i+1 < len(rs) && rs[i+1] == ':':
			toks = append(toks, token{text: "::"})
			i += 2
		default:
			toks = append(toks, token{text: string(r)})
			i++
		}
	}
	return toks, nil
}

// topLevel calls fn with each token outside parentheses, other than a
// parenthesis, and its index, in order, until fn returns false.
func topLevel(toks []token, fn func(i int, t token) bool) {
	depth := 0
	for i, t := range toks {
		switch {
		case !t.word && t.text == "(":
			depth++
		case !t.word && t.text == ")":
			depth--
		case depth == 0:
			if !fn(i, t) {
				return
			}
		}
	}
}

// split cuts toks at each sep outside parentheses.
func split(toks []token, sep string) [][]token {
	var (
		parts [][]token
		start int
	)
	topLevel(toks, func(i int, t token) bool {
		if !t.word && t.text == sep {
			parts = append(parts, toks[start:i])
			start = i + 1
		}
		return true
	})
	if start < len(toks) {
		parts = append(parts, toks[start:])
	}
	return parts
}

// selectEnds are the words that end a SELECT's list.
var selectEnds = map[string]bool{
	"from": true, "where": true, "group": true, "having": true, "window": true, "order": true,
	"limit": true, "offset": true, "union": true, "intersect": true, "except": true, "into": true, "for": true,
}

// statementColumns returns the result columns of one statement, nil if it
// returns no rows.
func statementColumns(stmt []token) []string {
	// The statement's verb is its first SELECT, INSERT, UPDATE or DELETE
	// outside parentheses: a WITH's queries are inside them.
	verb := -1
	topLevel(stmt, func(i int, t token) bool {
		if t.is("select") || t.is("insert") || t.is("update") || t.is("delete") {
			verb = i
			return false
		}
		return true
	})
	if verb < 0 {
		return nil
	}
	var list []token
	if stmt[verb].is("select") {
		list = stmt[verb+1:]
		topLevel(list, func(i int, t token) bool {
			if t.word && selectEnds[t.text] {
				list = list[:i]
				return false
			}
			return true
		})
	} else {
		topLevel(stmt[verb:], func(i int, t token) bool {
			if t.is("returning") {
				list = stmt[verb+i+1:]
			}
			return true
		})
		if list == nil {
			return nil
		}
	}
	if len(list) > 0 && (list[0].is("distinct") || list[0].is("all")) {
		list = list[1:]
	}
	var cols []string
	for _, item := range split(list, ",") {
		cols = append(cols, itemName(item))
	}
	return cols
}

// itemName names one item of a result list.
func itemName(item []token) string {
	n := len(item)
	switch {
	case n == 0:
		return ""
	case n >= 2 && item[n-1].word && item[n-2].is("as"):
		return item[n-1].text
	case n == 1 && item[0].word:
		return item[0].text
	case n == 3 && item[0].word && item[1].text == "." && (item[2].word || item[2].text == "*"):
		return item[2].text
	}
	texts := make([]string, n)
	for i, t := range item {
		texts[i] = t.text
	}
	return strings.Join(texts, " ")
}
