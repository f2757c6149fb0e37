// Package debugui holds the files of the hub's debugger page (see
// mercure.WithDebugger): HTML, CSS and JavaScript modules served as they
// are written, with no build step and nothing loaded from elsewhere, so
// that the page works offline and reads as it runs.
//
// index.html is an html/template of the hub's settings; the other files
// are served as they are.
package debugui

import "embed"

// Files are the page's files.
//
//go:embed index.html *.css *.js
var Files embed.FS
