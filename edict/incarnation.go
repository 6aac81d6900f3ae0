package edict

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// BumpIncarnation reads the incarnation stored at path, increments it, and
// stores the new value durably (write a temporary file, fsync, rename, fsync
// the folder) before returning it. A process must call it (or the stable
// store's equivalent) on every start before it sends anything, so that its
// clock readings increase across restarts (DESIGN §3, Lemma 7.1). A missing
// file starts at incarnation 1; a damaged one is an error naming the file,
// never a silent restart from 1.
func BumpIncarnation(path string) (uint64, error) {
	prev, err := readIncarnation(path)
	if err != nil {
		return 0, err
	}
	next := prev + 1
	if next == 0 {
		return 0, fmt.Errorf("edict: incarnation file %s: counter overflow", path)
	}
	var buf [13]byte
	buf[0] = WireVersion
	binary.BigEndian.PutUint64(buf[1:9], next)
	binary.BigEndian.PutUint32(buf[9:], crc32.ChecksumIEEE(buf[:9]))
	if err := writeFileDurably(path, buf[:]); err != nil {
		return 0, fmt.Errorf("edict: incarnation file %s: %w", path, err)
	}
	return next, nil
}

func readIncarnation(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("edict: incarnation file %s: %w", path, err)
	}
	return DecodeIncarnation(path, b)
}

// DecodeIncarnation parses the incarnation file format; name is used in
// errors.
func DecodeIncarnation(name string, b []byte) (uint64, error) {
	if len(b) != 13 {
		return 0, fmt.Errorf("edict: incarnation file %s: %d bytes, want 13", name, len(b))
	}
	if b[0] != WireVersion {
		return 0, fmt.Errorf("edict: incarnation file %s: unknown version byte %d", name, b[0])
	}
	if got, want := binary.BigEndian.Uint32(b[9:]), crc32.ChecksumIEEE(b[:9]); got != want {
		return 0, fmt.Errorf("edict: incarnation file %s: checksum %08x, want %08x", name, got, want)
	}
	return binary.BigEndian.Uint64(b[1:9]), nil
}

func writeFileDurably(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
