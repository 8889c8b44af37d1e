// Command karpenter-bench runs Karpenter's own scheduler (sigs.k8s.io/karpenter, the version pinned in go.mod) on a
// problem written by bench/compare.py: the same pods, NodePools and instance types Adze's core is given.
//
//	karpenter-bench schedule PROBLEM.json RESULT.json [-workers N]
//	karpenter-bench consolidate PROBLEM.json RESULT.json
//
// The result holds what the driver saw (for the equivalence check), the in-process timings (building the topology
// and scheduler; solving), and every NodeClaim the scheduler decided on with its pods, instance type options and the
// zones / capacity types its requirements still allow.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	"sigs.k8s.io/karpenter/pkg/operator/options"
)

type claimResult struct {
	NodePool      string   `json:"nodePool"`
	Pods          []string `json:"pods"`
	InstanceTypes []string `json:"instanceTypes"`
	Zones         []string `json:"zones"`
	CapacityTypes []string `json:"capacityTypes"`
	// The cheapest available offering of the options that the claim's requirements allow, as Karpenter computes it.
	Price float64 `json:"price"`
}

type scheduleResult struct {
	Karpenter    string       `json:"karpenter"`
	Go           string       `json:"go"`
	Workers      int          `json:"workers"`
	Input        inputSummary `json:"input"`
	ParseSeconds float64      `json:"parseSeconds"`
	BuildSeconds float64      `json:"buildSeconds"`
	SolveSeconds float64      `json:"solveSeconds"`
	// CPU time (user + system, every thread: the scheduler's and the garbage collector's) of building and solving.
	CoreCPUSeconds float64           `json:"coreCpuSeconds"`
	Claims         []claimResult     `json:"claims"`
	ExistingPods   int               `json:"existingPods"`
	PodErrors      map[string]string `json:"podErrors"`
	HeapPeakBytes  uint64            `json:"heapSysBytes"`
}

func main() {
	log.SetLogger(logging.NopLogger)
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: karpenter-bench schedule|consolidate PROBLEM.json RESULT.json [-workers N]")
		os.Exit(2)
	}
	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	workers := flags.Int("workers", 1, "scheduler.NumConcurrentReconciles (the provisioner's default: ceil(CPU_REQUESTS/1000) = 1)")
	profile := flags.String("cpuprofile", "", "write a CPU profile of the whole run here (go tool pprof)")
	_ = flags.Parse(os.Args[4:])
	if *profile != "" {
		out, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(out)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "karpenter-bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	var err error
	switch os.Args[1] {
	case "schedule":
		err = schedule(os.Args[2], os.Args[3], *workers)
	case "consolidate":
		err = consolidate(os.Args[2], os.Args[3])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "karpenter-bench:", err)
		os.Exit(1)
	}
}

func karpenterVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "sigs.k8s.io/karpenter" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// karpenterContext carries Karpenter's operator options with their production defaults (as parsed from no flags
// and no environment), and the preference policy the problem asks for.
func karpenterContext(preferencePolicy string) (context.Context, error) {
	opts := &options.Options{}
	fs := &options.FlagSet{FlagSet: flag.NewFlagSet("karpenter", flag.ContinueOnError)}
	opts.AddFlags(fs)
	args := []string{}
	if preferencePolicy != "" {
		args = append(args, "--preference-policy", preferencePolicy)
	}
	if err := opts.Parse(fs, args...); err != nil {
		return nil, err
	}
	return options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), opts), nil
}

func schedule(problemPath, resultPath string, workers int) error {
	started := time.Now()
	p, err := readProblem(problemPath)
	if err != nil {
		return err
	}
	ctx, err := karpenterContext(p.PreferencePolicy)
	if err != nil {
		return err
	}
	its := instanceTypes(p.InstanceTypes)
	byPool := map[string][]*cloudprovider.InstanceType{}
	for _, np := range p.NodePools {
		byPool[np.Name] = its
	}
	opts := []scheduling.Options{scheduling.NumConcurrentReconciles(workers)}
	if options.FromContext(ctx).PreferencePolicy == options.PreferencePolicyIgnore {
		opts = append(opts, scheduling.IgnorePreferences)
	}
	cloudProvider := fake.NewCloudProvider()
	cloudProvider.InstanceTypes = its
	kubeClient := fakecr.NewFakeClient()
	clk := &clock.RealClock{}
	cluster := state.NewCluster(clk, kubeClient, cloudProvider)
	parsed, cpuParsed := time.Now(), cpuSeconds()

	// Timed as Adze's core is: building the scheduler for the snapshot (topology, templates) and solving.
	topology, err := scheduling.NewTopology(ctx, kubeClient, cluster, nil, p.NodePools, byPool, p.Pods, opts...)
	if err != nil {
		return fmt.Errorf("creating topology: %w", err)
	}
	scheduler := scheduling.NewScheduler(ctx, kubeClient, p.NodePools, cluster, nil, topology, byPool, nil,
		events.NewRecorder(&record.FakeRecorder{}), clk, nil, nil, opts...)
	built := time.Now()
	results, err := scheduler.Solve(ctx, p.Pods)
	if err != nil {
		return fmt.Errorf("solving: %w", err)
	}
	solved, cpuSolved := time.Now(), cpuSeconds()

	var stats runtime.MemStats
	runtime.ReadMemStats(&stats)
	out := scheduleResult{
		Karpenter:      karpenterVersion(),
		Go:             runtime.Version(),
		Workers:        workers,
		Input:          summarize(p, its),
		ParseSeconds:   parsed.Sub(started).Seconds(),
		BuildSeconds:   built.Sub(parsed).Seconds(),
		SolveSeconds:   solved.Sub(built).Seconds(),
		CoreCPUSeconds: cpuSolved - cpuParsed,
		PodErrors:      map[string]string{},
		HeapPeakBytes:  stats.HeapSys,
	}
	zones, capacityTypes := offeringValues(its)
	for _, claim := range results.NewNodeClaims {
		out.Claims = append(out.Claims, describeClaim(claim, zones, capacityTypes))
	}
	for _, existing := range results.ExistingNodes {
		out.ExistingPods += len(existing.Pods)
	}
	for pod, podErr := range results.PodErrors {
		out.PodErrors[pod.Namespace+"/"+pod.Name] = podErr.Error()
	}
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(resultPath, data, 0o644)
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
}

func offeringValues(its []*cloudprovider.InstanceType) (zones, capacityTypes []string) {
	zoneSet, ctSet := map[string]bool{}, map[string]bool{}
	for _, it := range its {
		for _, o := range it.Offerings {
			zoneSet[o.Zone()] = true
			ctSet[o.CapacityType()] = true
		}
	}
	return sortedKeys(zoneSet), sortedKeys(ctSet)
}

func sortedKeys(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for key := range set {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

func describeClaim(claim *scheduling.NodeClaim, zones, capacityTypes []string) claimResult {
	result := claimResult{NodePool: claim.NodePoolName, Price: -1}
	for _, pod := range claim.Pods {
		result.Pods = append(result.Pods, pod.Namespace+"/"+pod.Name)
	}
	for _, it := range claim.InstanceTypeOptions {
		result.InstanceTypes = append(result.InstanceTypes, it.Name)
		offerings := it.Offerings.Available().Compatible(claim.Requirements)
		if len(offerings) > 0 {
			if cheapest := offerings.Cheapest().Price; result.Price < 0 || cheapest < result.Price {
				result.Price = cheapest
			}
		}
	}
	zoneReq := claim.Requirements.Get(corev1.LabelTopologyZone)
	for _, zone := range zones {
		if zoneReq.Has(zone) {
			result.Zones = append(result.Zones, zone)
		}
	}
	ctReq := claim.Requirements.Get(v1.CapacityTypeLabelKey)
	for _, ct := range capacityTypes {
		if ctReq.Has(ct) {
			result.CapacityTypes = append(result.CapacityTypes, ct)
		}
	}
	return result
}
