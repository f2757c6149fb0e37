// Command pgtasks is a small task list that keeps its tasks in PostgreSQL
// and pushes each change to its browsers through the embedded hub, with
// the transactional publish of package pgstore: a task's row and the
// update that announces it commit together, or neither does.
//
//	go run ./examples/pgtasks -addr localhost:3000 -db postgres://postgres@localhost:5432/postgres
//
// Open http://localhost:3000/ in two windows and add a task in one. Run
// two instances on two ports with the same -db: they act as one hub.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/pgstore"
)

//go:embed index.html
var page []byte

// topic is the topic of every task update.
const topic = "https://example.com/tasks"

// errEmptyTitle is a task without a title: refused by the table itself.
var errEmptyTitle = errors.New("a task needs a title")

// app is the task list: its pool, its store and its hub.
type app struct {
	pool  *pgxpool.Pool
	store *pgstore.Store
	hub   *mercure.Hub
}

// newApp creates the tasks table if needed and starts the hub on the
// pool's database.
func newApp(ctx context.Context, pool *pgxpool.Pool, hubURL string) (*app, error) {
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS tasks (
		id bigserial PRIMARY KEY,
		title text NOT NULL CHECK (title <> ''),
		created timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, err
	}
	store, err := pgstore.New(ctx, pool)
	if err != nil {
		return nil, err
	}
	hub, err := mercure.New(hubURL, mercure.WithStore(store),
		mercure.WithAnonymousSubscribers(), mercure.WithLogger(slog.Default()))
	if err != nil {
		store.Close()
		return nil, err
	}
	return &app{pool: pool, store: store, hub: hub}, nil
}

// task is a row of the table, and the data of its update.
type task struct {
	ID    int64  `json:"id"`
	Title string `json:"title"`
}

// addTask writes a task and publishes its update in one transaction.
// The update is recorded first: when the insert then fails (an empty
// title breaks the table's CHECK), the rollback takes the update with it,
// and no subscriber ever hears of a task that does not exist.
func (a *app) addTask(ctx context.Context, title string) (task, error) {
	var t task
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('tasks', 'id'))`).Scan(&id); err != nil {
			return err
		}
		t = task{ID: id, Title: title}
		data, _ := json.Marshal(t)
		if _, err := a.store.PublishTx(ctx, tx, mercure.Update{Topics: []string{topic}, Data: string(data)}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO tasks (id, title) VALUES ($1, $2)`, id, title)
		return err
	})
	if err != nil && strings.Contains(err.Error(), "tasks_title_check") {
		return task{}, errEmptyTitle
	}
	return t, err
}

// tasks lists the tasks, oldest first.
func (a *app) tasks(ctx context.Context) ([]task, error) {
	rows, err := a.pool.Query(ctx, `SELECT id, title FROM tasks ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[task])
}

// handler serves the page, the task API and the hub.
func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	a.hub.Mount(mux)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
	mux.HandleFunc("GET /tasks", func(w http.ResponseWriter, r *http.Request) {
		ts, err := a.tasks(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		// The hub's latest id: the page subscribes from there, so that it
		// misses no task added after this listing.
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(struct {
			Tasks       []task `json:"tasks"`
			LastEventID string `json:"lastEventID"`
		}{ts, a.hub.LastEventID()})
	})
	mux.HandleFunc("POST /tasks", func(w http.ResponseWriter, r *http.Request) {
		t, err := a.addTask(r.Context(), r.FormValue("title"))
		switch {
		case errors.Is(err, errEmptyTitle):
			http.Error(w, err.Error(), http.StatusBadRequest)
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(t)
		}
	})
	return mux
}

func main() {
	addr := flag.String("addr", "localhost:3000", "listen address")
	dsn := flag.String("db", "postgres://postgres@localhost:5432/postgres", "PostgreSQL URL")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	a, err := newApp(ctx, pool, fmt.Sprintf("http://%s/.well-known/mercure", *addr))
	if err != nil {
		log.Fatal(err)
	}
	defer a.store.Close() // after the hub's Shutdown
	srv := &http.Server{Addr: *addr, Handler: a.handler()}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a.hub.Shutdown(sctx)
		srv.Shutdown(sctx)
	}()
	log.Printf("tasks on http://%s/", *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Print(err)
	}
}
