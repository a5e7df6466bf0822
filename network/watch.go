package network

import (
	"context"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// watchDir calls changed whenever an entry of dir is created, written,
// removed or renamed, and on watcher errors (a lost event must not leave a
// stale configuration), until ctx is done or dir itself goes away. The
// returned channel is closed when the watch ends. It returns an error when
// dir cannot be watched. changed must not block.
//
// It is the package's only use of fsnotify, kept in one function so a
// shared directory watcher can replace it.
func watchDir(ctx context.Context, dir string, changed func()) (<-chan struct{}, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, err
	}
	dir = filepath.Clean(dir)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				changed()
				if filepath.Clean(ev.Name) == dir && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
					return // the watch is gone with the directory
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				changed()
			}
		}
	}()
	return done, nil
}
