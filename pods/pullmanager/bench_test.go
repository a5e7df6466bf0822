package pullmanager

import (
	"fmt"
	"testing"

	"k8s.io/utils/clock"
)

// The check of an image already on the node, as 30 pods of a burst make
// it at once: a preloaded image (no record), and one the agent pulled
// with node-wide credentials (a record), each with a pull of another
// image finishing meanwhile (its record written, synced and renamed).
func BenchmarkMustPull(b *testing.B) {
	for _, recorded := range []bool{false, true} {
		for _, writes := range []bool{false, true} {
			b.Run(fmt.Sprintf("recorded=%v/concurrentWrites=%v", recorded, writes), func(b *testing.B) {
				p, _ := NewPolicy(NeverVerifyPreloadedImages, nil)
				m, err := New(b.TempDir(), p, clock.RealClock{})
				if err != nil {
					b.Fatal(err)
				}
				if recorded {
					if err := m.RecordPulled(image, ref, Credentials{NodePodsAccessible: true}); err != nil {
						b.Fatal(err)
					}
				}
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if !writes {
							return
						}
						other := fmt.Sprintf("127.0.0.1:5000/other/app%d:1", i%8)
						_ = m.RecordIntent(other)
						_ = m.RecordPulled(other, fmt.Sprintf("sha256:%d", i%8), Credentials{NodePodsAccessible: true})
					}
				}()
				b.SetParallelism(15) // 30 goroutines on 2 CPUs
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if m.MustPull(image, ref, nil) {
							b.Error("must pull")
							return
						}
					}
				})
				b.StopTimer()
				close(stop)
				<-done
			})
		}
	}
}
