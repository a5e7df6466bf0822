package pleg

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

func TestExpectations(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := func(pod, ctr string, typ EventType) Event {
		return Event{PodUID: types.UID("uid-" + pod), ContainerID: ctr, Type: typ}
	}
	exp := func(pod, ctr string, typ EventType, ttl time.Duration) Expectation {
		return Expectation{PodUID: types.UID("uid-" + pod), ContainerID: ctr, Type: typ, Deadline: t0.Add(ttl)}
	}
	type step struct {
		after   time.Duration // clock step before this action
		expect  *Expectation
		observe *Event
		expire  bool // run expire(now)

		deliver  []Event
		met      int
		expired_ int
	}
	ptrE := func(e Event) *Event { return &e }
	ptrX := func(e Expectation) *Expectation { return &e }
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "proposal example: B died is held until A started is seen",
		steps: []step{
			{expect: ptrX(exp("p", "A", ContainerStarted, time.Minute))},
			{after: time.Second, observe: ptrE(ev("p", "B", ContainerDied))},
			{after: time.Second, observe: ptrE(ev("p", "A", ContainerStarted)), met: 1,
				deliver: []Event{ev("p", "B", ContainerDied)}},
		},
	}, {
		name: "pod without expectations gets events at once",
		steps: []step{
			{observe: ptrE(ev("p", "B", ContainerDied)), deliver: []Event{ev("p", "B", ContainerDied)}},
		},
	}, {
		name: "other pods are not held",
		steps: []step{
			{expect: ptrX(exp("p", "A", ContainerStarted, time.Minute))},
			{observe: ptrE(ev("q", "C", ContainerDied)), deliver: []Event{ev("q", "C", ContainerDied)}},
		},
	}, {
		name: "met expectation alone delivers nothing",
		steps: []step{
			{expect: ptrX(exp("p", "A", ContainerStarted, time.Minute))},
			{observe: ptrE(ev("p", "A", ContainerStarted)), met: 1},
			{observe: ptrE(ev("p", "A", ContainerDied)), deliver: []Event{ev("p", "A", ContainerDied)}},
		},
	}, {
		name: "intermediate ContainerChanged is absorbed",
		steps: []step{
			{expect: ptrX(exp("p", "A", ContainerStarted, time.Minute))},
			{observe: ptrE(ev("p", "A", ContainerChanged))},
			{observe: ptrE(ev("p", "A", ContainerStarted)), met: 1},
		},
	}, {
		name: "died before started was seen: expectation met, death is news",
		steps: []step{
			{expect: ptrX(exp("p", "A", ContainerStarted, time.Minute))},
			{observe: ptrE(ev("p", "B", ContainerDied))},
			{observe: ptrE(ev("p", "A", ContainerDied)), met: 1,
				deliver: []Event{ev("p", "B", ContainerDied), ev("p", "A", ContainerDied)}},
		},
	}, {
		name: "removal of a running container: died is absorbed",
		steps: []step{
			{expect: ptrX(exp("p", "A", ContainerRemoved, time.Minute))},
			{observe: ptrE(ev("p", "A", ContainerDied))},
			{observe: ptrE(ev("p", "A", ContainerRemoved)), met: 1},
		},
	}, {
		name: "two expectations: held until both are met, in order",
		steps: []step{
			{expect: ptrX(exp("p", "A", ContainerStarted, time.Minute))},
			{expect: ptrX(exp("p", "B", ContainerRemoved, time.Minute))},
			{observe: ptrE(ev("p", "C", ContainerDied))},
			{observe: ptrE(ev("p", "A", ContainerStarted)), met: 1},
			{observe: ptrE(ev("p", "C", ContainerStarted))},
			{observe: ptrE(ev("p", "B", ContainerRemoved)), met: 1,
				deliver: []Event{ev("p", "C", ContainerDied), ev("p", "C", ContainerStarted)}},
		},
	}, {
		name: "expiry releases held events",
		steps: []step{
			{expect: ptrX(exp("p", "A", ContainerStarted, 10*time.Second))},
			{after: time.Second, observe: ptrE(ev("p", "B", ContainerDied))},
			{after: 8 * time.Second, expire: true},
			{after: time.Second, expire: true, expired_: 1, deliver: []Event{ev("p", "B", ContainerDied)}},
			{observe: ptrE(ev("p", "A", ContainerStarted)), deliver: []Event{ev("p", "A", ContainerStarted)}},
		},
	}, {
		name: "expired expectation found while observing",
		steps: []step{
			{expect: ptrX(exp("p", "A", ContainerStarted, 10*time.Second))},
			{expect: ptrX(exp("p", "B", ContainerStarted, time.Minute))},
			{after: 11 * time.Second, observe: ptrE(ev("p", "A", ContainerStarted)), expired_: 1},
			{observe: ptrE(ev("p", "B", ContainerStarted)), met: 1, deliver: []Event{ev("p", "A", ContainerStarted)}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			x := newExpectations()
			for i, s := range tc.steps {
				clk.Step(s.after)
				var deliver []Event
				var met, expired []Expectation
				switch {
				case s.expect != nil:
					x.add(*s.expect)
				case s.observe != nil:
					deliver, met, expired = x.observe(*s.observe, clk.Now())
				case s.expire:
					deliver, expired = x.expire(clk.Now())
				}
				if !reflect.DeepEqual(deliver, s.deliver) && !(len(deliver) == 0 && len(s.deliver) == 0) {
					t.Errorf("step %d: deliver %+v, want %+v", i, deliver, s.deliver)
				}
				if len(met) != s.met || len(expired) != s.expired_ {
					t.Errorf("step %d: met %d expired %d, want %d and %d", i, len(met), len(expired), s.met, s.expired_)
				}
			}
		})
	}
}

func TestExpectationsNextDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := newExpectations()
	if _, ok := x.nextDeadline(); ok {
		t.Fatal("deadline without expectations")
	}
	x.add(Expectation{PodUID: "a", ContainerID: "1", Type: ContainerStarted, Deadline: t0.Add(time.Minute)})
	x.add(Expectation{PodUID: "b", ContainerID: "2", Type: ContainerStarted, Deadline: t0.Add(time.Second)})
	if d, ok := x.nextDeadline(); !ok || !d.Equal(t0.Add(time.Second)) {
		t.Fatalf("nextDeadline = %v %v", d, ok)
	}
}
