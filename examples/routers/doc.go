// Package routers holds the tests of a hub routed by third-party routers
// (chi, gorilla/mux): they live in the examples module so that the root
// module requires no router. The recipes themselves are in the tests.
package routers
