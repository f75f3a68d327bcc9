// Package faultfs injects storage faults under the real Pebble, for the
// tests and the simulator (docs/rules/storage.md S11). It is Pebble's
// errorfs with one gap closed: errorfs wraps the files it creates and
// opens, but not the one ReuseForWrite hands back, which is how Pebble
// recycles its write-ahead logs; without this, every fault aimed at a WAL
// after the first memtable flush would silently miss.
package faultfs

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// Wrap returns fs with inj deciding, before each operation, whether it
// fails instead.
func Wrap(fs vfs.FS, inj errorfs.Injector) vfs.FS {
	return reusing{FS: errorfs.Wrap(fs, inj), inj: inj}
}

type reusing struct {
	*errorfs.FS
	inj errorfs.Injector
}

func (r reusing) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := r.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		return nil, err
	}
	return errorfs.WrapFile(f, named{inj: r.inj, path: newname}), nil
}

// named gives the operations of a wrapped file their path, which
// errorfs.WrapFile leaves empty.
type named struct {
	inj  errorfs.Injector
	path string
}

func (n named) String() string { return n.inj.String() }

func (n named) MaybeError(op errorfs.Op) error {
	if op.Path == "" {
		op.Path = n.path
	}
	return n.inj.MaybeError(op)
}
