package main

// The exchange format Python writes (bench/exchange.py) and this driver reads: the same pods, NodePools and
// instance types (with offerings and prices) that Adze's scheduling core is given.

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"
)

const problemFormat = "adze-karpenter-bench/v1"

type offeringSpec struct {
	Zone         string  `json:"zone"`
	ZoneID       string  `json:"zoneID,omitempty"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	Available    bool    `json:"available"`
}

type instanceTypeSpec struct {
	Name      string              `json:"name"`
	Capacity  corev1.ResourceList `json:"capacity"`
	Overhead  corev1.ResourceList `json:"overhead"`
	Labels    map[string]string   `json:"labels"`
	Offerings []offeringSpec      `json:"offerings"`
}

type problem struct {
	Format           string             `json:"format"`
	Name             string             `json:"name"`
	PreferencePolicy string             `json:"preferencePolicy"`
	NodePools        []*v1.NodePool     `json:"nodePools"`
	InstanceTypes    []instanceTypeSpec `json:"instanceTypes"`
	Pods             []*corev1.Pod      `json:"pods"`
	// A consolidation problem also has the running cluster (the pods above are then bound to these nodes) and the
	// time of the decision.
	Nodes      []*corev1.Node  `json:"nodes,omitempty"`
	NodeClaims []*v1.NodeClaim `json:"nodeClaims,omitempty"`
	Now        time.Time       `json:"now,omitempty"`
}

func readProblem(path string) (*problem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &problem{}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if p.Format != problemFormat {
		return nil, fmt.Errorf("%s: format %q, want %q", path, p.Format, problemFormat)
	}
	if len(p.NodePools) == 0 || len(p.InstanceTypes) == 0 {
		return nil, fmt.Errorf("%s: needs nodePools and instanceTypes", path)
	}
	for _, pod := range p.Pods {
		// Adze treats a pod without nodeName or phase as pending; Karpenter's queue reads the phase.
		if pod.Status.Phase == "" {
			pod.Status.Phase = corev1.PodPending
		}
	}
	return p, nil
}

// instanceTypes builds Karpenter's instance types the way a cloud provider does: one requirement per label (In its
// value), zone / zone-id / capacity-type requirements from the available offerings, and DoesNotExist for a label
// key that other types of the catalogue carry and this one lacks (the AWS provider does this for GPU, accelerator
// and local-storage labels). Every label key is registered as well known, as the AWS provider registers its own.
func instanceTypes(specs []instanceTypeSpec) []*cloudprovider.InstanceType {
	keys := map[string]bool{}
	for _, spec := range specs {
		for key := range spec.Labels {
			keys[key] = true
		}
	}
	for key := range keys {
		v1.WellKnownLabels.Insert(key)
	}
	// Offerings carry the zone ID (as the AWS provider's do), a well-known label there too.
	v1.WellKnownLabels.Insert(zoneIDLabel)
	sortedKeys := make([]string, 0, len(keys))
	for key := range keys {
		sortedKeys = append(sortedKeys, key)
	}
	sort.Strings(sortedKeys)
	result := make([]*cloudprovider.InstanceType, 0, len(specs))
	for _, spec := range specs {
		offerings := cloudprovider.Offerings{}
		zones, zoneIDs, capacityTypes := []string{}, []string{}, []string{}
		for _, o := range spec.Offerings {
			labels := map[string]string{corev1.LabelTopologyZone: o.Zone, v1.CapacityTypeLabelKey: o.CapacityType}
			if o.ZoneID != "" {
				labels[zoneIDLabel] = o.ZoneID
			}
			offerings = append(offerings, &cloudprovider.Offering{
				Requirements: scheduling.NewLabelRequirements(labels),
				Price:        o.Price,
				Available:    o.Available,
			})
			if o.Available {
				zones = append(zones, o.Zone)
				capacityTypes = append(capacityTypes, o.CapacityType)
				if o.ZoneID != "" {
					zoneIDs = append(zoneIDs, o.ZoneID)
				}
			}
		}
		requirements := scheduling.NewRequirements()
		for _, key := range sortedKeys {
			if value, ok := spec.Labels[key]; ok {
				requirements.Add(scheduling.NewRequirement(key, corev1.NodeSelectorOpIn, value))
			} else {
				requirements.Add(scheduling.NewRequirement(key, corev1.NodeSelectorOpDoesNotExist))
			}
		}
		requirements.Add(scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, spec.Name))
		requirements.Add(scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...))
		requirements.Add(scheduling.NewRequirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, capacityTypes...))
		if len(zoneIDs) > 0 {
			requirements.Add(scheduling.NewRequirement(zoneIDLabel, corev1.NodeSelectorOpIn, zoneIDs...))
		}
		result = append(result, &cloudprovider.InstanceType{
			Name:         spec.Name,
			Requirements: requirements,
			Offerings:    offerings,
			Capacity:     spec.Capacity,
			Overhead:     &cloudprovider.InstanceTypeOverhead{KubeReserved: spec.Overhead},
		})
	}
	return result
}

const zoneIDLabel = "topology.k8s.aws/zone-id"

// inputSummary is what the driver saw, for Python to compare with what Adze saw (bench/exchange.py).
type inputSummary struct {
	InstanceTypes      int              `json:"instanceTypes"`
	Offerings          int              `json:"offerings"`
	AvailableOfferings int              `json:"availableOfferings"`
	OfferingPriceSum   float64          `json:"offeringPriceSum"`
	AllocatableMilli   map[string]int64 `json:"allocatableMilli"`
	Pods               int              `json:"pods"`
	PodRequestsMilli   map[string]int64 `json:"podRequestsMilli"`
	NodePools          []string         `json:"nodePools"`
}

func summarize(p *problem, its []*cloudprovider.InstanceType) inputSummary {
	s := inputSummary{AllocatableMilli: map[string]int64{}, PodRequestsMilli: map[string]int64{}}
	s.InstanceTypes = len(its)
	for _, it := range its {
		for _, o := range it.Offerings {
			s.Offerings++
			s.OfferingPriceSum += o.Price
			if o.Available {
				s.AvailableOfferings++
			}
		}
		for name, q := range it.Allocatable() {
			s.AllocatableMilli[string(name)] += q.MilliValue()
		}
	}
	for _, pod := range p.Pods {
		s.Pods++
		for name, q := range resources.RequestsForPods(pod) {
			s.PodRequestsMilli[string(name)] += q.MilliValue()
		}
	}
	for _, np := range p.NodePools {
		s.NodePools = append(s.NodePools, np.Name)
	}
	return s
}
