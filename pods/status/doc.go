// Package status computes pod statuses as kubelet 1.34 reports them and
// writes them to the API server.
//
// Compute is a pure function of the desired pod (with its last status), the
// runtime's view of its containers, what the worker knows beyond the runtime
// (Input: admission refusal, why containers wait, image IDs) and now: phase,
// conditions, (init) container statuses with kubelet's reasons. Manager
// writes a status only when it differs from the API's copy (Equal ignores
// what kubelet ignores), one pod at a time through a rate-limited work
// queue.
package status
