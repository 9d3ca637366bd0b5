//go:build !linux

package file

import "errors"

var errExchangeUnsupported = errors.New("rename exchange unsupported")

// exchange is not available here: the spare is renamed over the file.
func exchange(a, b string) error { return errExchangeUnsupported }
