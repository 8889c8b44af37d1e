package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podCache serves pod lists from memory, as the informer cache a live Karpenter reads through does (deep copies of
// the stored pods, indexed by spec.nodeName), instead of controller-runtime's fake client, which round-trips every
// listed object through JSON: three quarters of a consolidation decision's CPU went there. Everything else goes to
// the fake client. The pods never change during one decision.
type podCache struct {
	client.Client
	all    []*corev1.Pod
	byNode map[string][]*corev1.Pod
}

func newPodCache(c client.Client, pods []*corev1.Pod) *podCache {
	cache := &podCache{Client: c, all: pods, byNode: map[string][]*corev1.Pod{}}
	for _, pod := range pods {
		cache.byNode[pod.Spec.NodeName] = append(cache.byNode[pod.Spec.NodeName], pod)
	}
	return cache
}

func (c *podCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	podList, ok := list.(*corev1.PodList)
	if !ok {
		return c.Client.List(ctx, list, opts...)
	}
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	candidates := c.all
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		node, found := o.FieldSelector.RequiresExactMatch("spec.nodeName")
		if !found || len(o.FieldSelector.Requirements()) != 1 {
			return c.Client.List(ctx, list, opts...)
		}
		candidates = c.byNode[node]
	}
	podList.Items = make([]corev1.Pod, 0, len(candidates))
	for _, pod := range candidates {
		if o.Namespace != "" && pod.Namespace != o.Namespace {
			continue
		}
		if o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		podList.Items = append(podList.Items, *pod.DeepCopy())
	}
	return nil
}
