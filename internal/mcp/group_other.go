//go:build !unix

package mcp

import "os/exec"

func setGroup(*exec.Cmd) {}

func killGroup(int) {}
