package file

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// An inbox's cursor file (inbox/<member>.cursor) holds two slots of
// cursorSlot bytes, each a cursor as one JSON line padded with spaces, with
// a sequence number: the slot with the higher one that still names a line
// of the inbox is the cursor. A write goes, in place, to the other slot
// (the one not holding the newest cursor) with one fdatasync: no new file,
// no rename and no fsync of the directory, which an ack, made at every wake
// of every member, would otherwise pay. A write torn by a crash leaves its
// slot unreadable or naming a line the inbox does not have (the cursor
// carries the line's length and hash), and the other slot, the cursor as
// it was before, is read. A file of one JSON line without a sequence number
// (written before the slots) is read as the cursor of sequence 0.
const cursorSlot = 128

type slotCursor struct {
	Seq int64 `json:"seq"`
	cursor
}

// readSlots returns the cursors the slots of the file at path hold, newest
// first; slots that cannot be read are left out.
func readSlots(path string) ([]slotCursor, error) {
	f, err := openFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := slotBytes(f)
	if err != nil {
		return nil, err
	}
	slots, _ := parseSlots(data)
	return slots, nil
}

// slotBytes reads the two slots of an open cursor file (fewer bytes when
// the file is shorter).
func slotBytes(f *os.File) ([]byte, error) {
	buf := make([]byte, 2*cursorSlot)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// parseSlots returns the readable cursors of data, newest first, and the
// slot of the newest (-1: none).
func parseSlots(data []byte) (out []slotCursor, newest int) {
	newest = -1
	for i := 0; i < 2 && i*cursorSlot < len(data); i++ {
		slot := data[i*cursorSlot : min(len(data), (i+1)*cursorSlot)]
		var c slotCursor
		if json.Unmarshal(bytes.TrimRight(slot, " \n\x00"), &c) != nil || c.Seq < 0 || c.Offset < 0 {
			continue
		}
		if len(out) == 0 || c.Seq > out[0].Seq {
			out, newest = append([]slotCursor{c}, out...), i
		} else {
			out = append(out, c)
		}
	}
	return out, newest
}

// writeCursorFile makes c the newest cursor of the file at path; the
// caller holds the inbox's lock.
func writeCursorFile(path string, c cursor) error {
	f, err := openFile(path, os.O_RDWR, 0)
	created := false
	if errors.Is(err, fs.ErrNotExist) {
		var exists bool
		if exists, err = makeFile(path, 0o600); err == nil {
			created = !exists
			f, err = openFile(path, os.O_RDWR, 0)
		}
	}
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := slotBytes(f)
	if err != nil {
		return err
	}
	// The slot to write is the one not holding the newest cursor.
	slot, seq := 0, int64(1)
	if slots, newest := parseSlots(data); newest >= 0 {
		slot, seq = 1-newest, slots[0].Seq+1
	}
	line, err := json.Marshal(slotCursor{Seq: seq, cursor: c})
	if err != nil {
		return err
	}
	if len(line) > cursorSlot-1 {
		return fmt.Errorf("cursor %s: %d bytes, more than a slot", path, len(line))
	}
	rec := bytes.Repeat([]byte{' '}, cursorSlot)
	copy(rec, line)
	rec[cursorSlot-1] = '\n'
	if _, err := f.WriteAt(rec, int64(slot*cursorSlot)); err != nil {
		return err
	}
	if err := fdatasync(f); err != nil {
		return err
	}
	if created {
		return syncDir(filepath.Dir(path))
	}
	return nil
}
