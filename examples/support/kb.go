package support

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Article is a knowledge base article.
type Article struct {
	ID    string
	Title string
	Body  string
}

// SearchKB returns up to limit articles that share words with query, best
// match first.
func (w *World) SearchKB(ctx context.Context, query string, limit int) ([]Article, error) {
	rows, err := w.db.QueryContext(ctx, `SELECT id, title, body, keywords FROM kb_articles`)
	if err != nil {
		return nil, fmt.Errorf("search kb: %w", err)
	}
	defer rows.Close()
	type hit struct {
		Article
		score int
	}
	var hits []hit
	terms := words(query)
	for rows.Next() {
		var a Article
		var keywords string
		if err := rows.Scan(&a.ID, &a.Title, &a.Body, &keywords); err != nil {
			return nil, fmt.Errorf("search kb: %w", err)
		}
		text := words(a.Title + " " + a.Body + " " + keywords)
		score := 0
		for _, t := range terms {
			if slices.Contains(text, t) {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, hit{a, score})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search kb: %w", err)
	}
	slices.SortFunc(hits, func(a, b hit) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.ID, b.ID))
	})
	articles := make([]Article, 0, min(limit, len(hits)))
	for _, h := range hits[:min(limit, len(hits))] {
		articles = append(articles, h.Article)
	}
	return articles, nil
}

// Article returns one article.
func (w *World) Article(ctx context.Context, id string) (Article, error) {
	a := Article{ID: id}
	err := w.db.QueryRowContext(ctx, `SELECT title, body FROM kb_articles WHERE id = ?`, id).Scan(&a.Title, &a.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return Article{}, fmt.Errorf("article %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Article{}, fmt.Errorf("get article %s: %w", id, err)
	}
	return a, nil
}

// words splits text into lower-case words.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}
