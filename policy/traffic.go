package policy

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/belayrun/belay"
	"github.com/goccy/go-yaml/ast"
)

var trafficFields = []string{"kind", "count", "external", "cents", "bulk", "harm", "effect"}

// LoadTraffic reads a traffic file: a YAML or JSON list of actions with the
// keys kind, count, external, cents, bulk, harm and effect (.yaml, .yml,
// .json), or a CSV file with those column names in its header (.csv). Only
// kind and count are required.
func LoadTraffic(path string) ([]Action, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTraffic(path, data)
}

// ParseTraffic parses traffic in the format its name's extension says.
func ParseTraffic(name string, data []byte) ([]Action, error) {
	var (
		actions []Action
		err     error
	)
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".yaml", ".yml", ".json":
		actions, err = parseTrafficYAML(name, data)
	case ".csv":
		actions, err = parseTrafficCSV(name, data)
	default:
		return nil, fmt.Errorf("%s: unknown traffic format %q; want .yaml, .yml, .json or .csv", name, ext)
	}
	if err == nil && len(actions) == 0 {
		err = &Error{File: name, Msg: "the file lists no actions"}
	}
	return actions, err
}

func parseTrafficYAML(name string, data []byte) ([]Action, error) {
	d := &decoder{file: name}
	body, ok := d.document(data)
	if !ok {
		return nil, d.err()
	}
	var actions []Action
	d.list(body, "", func(_ int, n ast.Node, path string) {
		var a Action
		present, ok := d.fields(n, path, trafficFields, func(key string, v ast.Node, field string) {
			switch key {
			case "kind":
				a.Kind, _ = d.str(v, field)
			case "count":
				c, _ := d.integer(v, field, 0, math.MaxInt32)
				a.Count = int(c)
			case "external":
				a.External, _ = d.boolean(v, field)
			case "cents":
				a.Cents, _ = d.integer(v, field, math.MinInt64, math.MaxInt64)
			case "bulk":
				b, _ := d.integer(v, field, math.MinInt32, math.MaxInt32)
				a.Bulk = int(b)
			case "harm":
				a.Harm, _ = d.harm(v, field)
			case "effect":
				e, _ := d.oneOf(v, field, effects)
				a.Effect = belay.EffectClass(e)
			}
		})
		if !ok {
			return
		}
		for _, k := range []string{"kind", "count"} {
			if present[k] == nil {
				d.fail(n, path+"."+k, "missing")
			}
		}
		actions = append(actions, a)
	})
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	return actions, nil
}

func (d *decoder) harm(n ast.Node, field string) (float64, bool) {
	text, _, ok := d.number(n, field)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) {
		d.fail(n, field, "%s is not a finite number at least 0", text)
		return 0, false
	}
	return v, true
}

func parseTrafficCSV(name string, data []byte) ([]Action, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.Comment = '#'
	r.TrimLeadingSpace = true
	header, err := r.Read()
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	col := make(map[string]int, len(header))
	var errs []error
	for i, h := range header {
		h = strings.TrimSpace(h)
		line, _ := r.FieldPos(i)
		switch {
		case !slices.Contains(trafficFields, h):
			errs = append(errs, &Error{File: name, Line: line, Field: h, Msg: "unknown column; want " + strings.Join(trafficFields, ", ")})
		case col[h] != 0:
			errs = append(errs, &Error{File: name, Line: line, Field: h, Msg: "a second column of that name"})
		default:
			col[h] = i + 1 // 0 is absent
		}
	}
	for _, k := range []string{"kind", "count"} {
		if col[k] == 0 {
			errs = append(errs, &Error{File: name, Line: 1, Field: k, Msg: "missing column; the header names " + strings.Join(trafficFields, ", ")})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var actions []Action
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(name, err)
		}
		row := csvRow{name: name, rec: rec, col: col, r: r}
		a := Action{
			Kind:     row.text("kind"),
			Count:    int(row.integer("count", 0, math.MaxInt32)),
			External: row.boolean("external"),
			Cents:    row.integer("cents", math.MinInt64, math.MaxInt64),
			Bulk:     int(row.integer("bulk", math.MinInt32, math.MaxInt32)),
			Harm:     row.harm("harm"),
			Effect:   belay.EffectClass(row.text("effect")),
		}
		if a.Kind == "" {
			row.fail("kind", "is empty")
		}
		if a.Effect != "" && !slices.Contains(effects, string(a.Effect)) {
			row.fail("effect", "%q is not one of %s", a.Effect, strings.Join(effects, ", "))
		}
		errs = append(errs, row.errs...)
		actions = append(actions, a)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return actions, nil
}

func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &Error{File: name, Line: pe.Line, Msg: pe.Err.Error()}
	}
	return fmt.Errorf("%s: %w", name, err)
}

// csvRow reads the cells of one record by column name; an absent column or
// an empty cell is the zero value.
type csvRow struct {
	name string
	rec  []string
	col  map[string]int
	r    *csv.Reader
	errs []error
}

func (c *csvRow) text(k string) string {
	i := c.col[k] - 1
	if i < 0 || i >= len(c.rec) {
		return ""
	}
	return strings.TrimSpace(c.rec[i])
}

func (c *csvRow) fail(k, format string, args ...any) {
	line := 0
	if i := c.col[k] - 1; i >= 0 && i < len(c.rec) {
		line, _ = c.r.FieldPos(i)
	}
	c.errs = append(c.errs, &Error{File: c.name, Line: line, Field: k, Msg: fmt.Sprintf(format, args...)})
}

func (c *csvRow) integer(k string, lo, hi int64) int64 {
	s := c.text(k)
	if s == "" {
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		c.fail(k, "%q is not a whole number in [%d, %d]", s, lo, hi)
		return 0
	}
	return v
}

func (c *csvRow) boolean(k string) bool {
	s := c.text(k)
	if s == "" {
		return false
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		c.fail(k, "%q is not true or false", s)
	}
	return v
}

func (c *csvRow) harm(k string) float64 {
	s := c.text(k)
	if s == "" {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		c.fail(k, "%q is not a finite number at least 0", s)
		return 0
	}
	return v
}
