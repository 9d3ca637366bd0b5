// Package fakeapiexamples bundles the example scripts of the fake API so that
// troupe can play them offline (`troupe demo`) and tests can use them as
// shipped.
package fakeapiexamples

import _ "embed"

// SingleAgent is single-agent.yaml: one agent writes, edits and shows
// hello.txt.
//
//go:embed single-agent.yaml
var SingleAgent []byte

// RESTToGraphQL is rest-to-graphql.yaml: the team story of `troupe demo`.
//
//go:embed rest-to-graphql.yaml
var RESTToGraphQL []byte

// RESTToGraphQLWorktree is rest-to-graphql-worktree.yaml: what `troupe
// demo --isolation worktree` adds to the story (a conflict on README.md
// that goes back to its owner and is resolved).
//
//go:embed rest-to-graphql-worktree.yaml
var RESTToGraphQLWorktree []byte

// LighthousePersonas is lighthouse-personas.yaml: seed 004's persona story
// of `troupe demo --pattern fixed-theme --theme example`.
//
//go:embed lighthouse-personas.yaml
var LighthousePersonas []byte
