//go:build unix && !linux

package mcp

import "syscall"

func setDeathSignal(*syscall.SysProcAttr) {}
