package main

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore/pgtest"
	"github.com/mercurekit/mercure/storetest"
)

// TestTransactionalPublish: a task added reaches a subscriber; one the
// table refuses (an empty title) is rolled back with its update, which no
// subscriber ever gets.
func TestTransactionalPublish(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	// A database of the test's own: the app uses fixed table names.
	admin, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := "pgtasks_test_" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec(ctx, `DROP DATABASE `+name+` WITH (FORCE)`)
	u, _ := url.Parse(dsn)
	u.Path = "/" + name
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	a, err := newApp(ctx, pool, "http://example.com/.well-known/mercure")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.handler())
	defer func() {
		srv.Close()
		a.hub.Shutdown(ctx)
		a.store.Close()
	}()

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+"/.well-known/mercure?match="+url.QueryEscape(topic), nil)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data <- d
			}
		}
	}()
	add := func(title string, status int) {
		t.Helper()
		r, err := http.PostForm(srv.URL+"/tasks", url.Values{"title": {title}})
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != status {
			t.Fatalf("adding %q: %s, want %d", title, r.Status, status)
		}
	}
	add("", http.StatusBadRequest)
	add("write the report", http.StatusOK)
	select {
	case d := <-data:
		if !strings.Contains(d, `"title":"write the report"`) {
			t.Fatalf("first update %s: the rolled-back task's, or another", d)
		}
	case <-time.After(storetest.Deadline):
		t.Fatal("no update for the task")
	}
	ts, err := a.tasks(ctx)
	if err != nil || len(ts) != 1 {
		t.Fatalf("tasks %v (%v), want the one", ts, err)
	}
	// The store checks PublishTx's updates with the hub's rules, with no
	// option to set: this hub authorizes no subscriber, so it refuses a
	// private update, as Hub.Publish does.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := a.store.PublishTx(ctx, tx, mercure.Update{Topics: []string{topic}, Data: "{}", Private: true})
		return err
	})
	if !errors.Is(err, mercure.ErrInvalidUpdate) {
		t.Fatalf("a private update in a transaction: %v, want ErrInvalidUpdate", err)
	}
}
