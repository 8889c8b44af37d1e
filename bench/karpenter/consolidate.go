package main

// One disruption decision of Karpenter's own controller (pkg/controllers/disruption) on a running cluster written
// by bench/compare.py: its methods in its order (emptiness, static drift, drift, multi-node, single-node
// consolidation), each asked for candidates, budgets and commands as Controller.disrupt asks, over a cluster state
// filled from the problem's Nodes, NodeClaims and bound Pods. Nothing is executed: the first method that returns a
// command decides, as in one Reconcile.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/awslabs/operatorpkg/object"
	"github.com/awslabs/operatorpkg/status"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/controllers/disruption"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/test/v1alpha1"
)

type candidateResult struct {
	Name  string  `json:"name"`
	Price float64 `json:"price"`
}

type decisionResult struct {
	Karpenter      string             `json:"karpenter"`
	Go             string             `json:"go"`
	Input          inputSummary       `json:"input"`
	Nodes          int                `json:"nodes"`
	Candidates     map[string]int     `json:"candidates"`    // per method: nodes it may disrupt
	MethodSeconds  map[string]float64 `json:"methodSeconds"` // per method tried: wall time, to see a time limit hit
	ParseSeconds   float64            `json:"parseSeconds"`
	LoadSeconds    float64            `json:"loadSeconds"`
	DecideSeconds  float64            `json:"decideSeconds"`
	DecideCPU      float64            `json:"decideCpuSeconds"`
	Method         string             `json:"method"`
	Decision       string             `json:"decision"`
	Commands       int                `json:"commands"`
	Disrupted      []candidateResult  `json:"candidatesDisrupted"`
	Replacements   []claimResult      `json:"replacements"`
	SavingsPerHour float64            `json:"savingsPerHour"`
}

// acceptAll stands in for the 15-second re-validation a command gets before it is executed: it is not part of
// deciding, and it would wait on the clock.
type acceptAll struct{}

func (acceptAll) Validate(_ context.Context, cmd disruption.Command, _ time.Duration) (disruption.Command, error) {
	return cmd, nil
}

// shiftedClock is the real clock moved to the problem's time: the cluster's timestamps read as in the problem, and
// Karpenter's own time limits (single-node consolidation gives up after 3 minutes, multi-node after 1) run in real
// time, as in a live controller.
type shiftedClock struct {
	clock.RealClock
	offset time.Duration
}

func (c *shiftedClock) Now() time.Time                  { return time.Now().Add(c.offset) }
func (c *shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// The fake cloud provider manages only its test node class; the problem's NodePools and NodeClaims are pointed at
// it (nothing in scheduling or disruption reads the node class beyond that check).
func testNodeClassRef() *v1.NodeClassReference {
	gvk := object.GVK(&v1alpha1.TestNodeClass{})
	return &v1.NodeClassReference{Group: gvk.Group, Kind: gvk.Kind, Name: "default"}
}

func consolidate(problemPath, resultPath string) error {
	started := time.Now()
	p, err := readProblem(problemPath)
	if err != nil {
		return err
	}
	if p.Now.IsZero() || len(p.Nodes) == 0 {
		return fmt.Errorf("%s: a consolidation problem needs now, nodes and nodeClaims", problemPath)
	}
	ctx, err := karpenterContext(p.PreferencePolicy)
	if err != nil {
		return err
	}
	its := instanceTypes(p.InstanceTypes)
	parsed := time.Now()

	clk := &shiftedClock{offset: p.Now.Sub(time.Now())}
	cloudProvider := fake.NewCloudProvider()
	cloudProvider.InstanceTypes = its
	objects := []client.Object{}
	for _, np := range p.NodePools {
		np.Spec.Template.Spec.NodeClassRef = testNodeClassRef()
		np.StatusConditions().SetTrue(v1.ConditionTypeValidationSucceeded)
		np.StatusConditions().SetTrue(v1.ConditionTypeNodeClassReady)
		np.StatusConditions().SetTrue(v1.ConditionTypeNodeRegistrationHealthy)
		if !np.StatusConditions().IsTrue(status.ConditionReady) {
			return fmt.Errorf("NodePool %s is not ready", np.Name)
		}
		objects = append(objects, np)
	}
	for _, nc := range p.NodeClaims {
		nc.Spec.NodeClassRef = testNodeClassRef()
		// Set by Karpenter's nodeclaim disruption controller once consolidateAfter has passed since the last pod
		// event; the problem's NodePools say consolidateAfter: 0s.
		nc.StatusConditions().SetTrue(v1.ConditionTypeConsolidatable)
		objects = append(objects, nc)
	}
	for _, node := range p.Nodes {
		objects = append(objects, node)
	}
	for _, pod := range p.Pods {
		objects = append(objects, pod)
	}
	objectStore := fakecr.NewClientBuilder().
		WithObjects(objects...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.NodeName}
		}).
		WithIndex(&corev1.Node{}, "spec.providerID", func(o client.Object) []string {
			return []string{o.(*corev1.Node).Spec.ProviderID}
		}).
		WithIndex(&v1.NodeClaim{}, "status.providerID", func(o client.Object) []string {
			return []string{o.(*v1.NodeClaim).Status.ProviderID}
		}).
		Build()
	kubeClient := newPodCache(objectStore, p.Pods)
	recorder := events.NewRecorder(&record.FakeRecorder{})
	cluster := state.NewCluster(clk, kubeClient, cloudProvider)
	for _, nc := range p.NodeClaims {
		cluster.UpdateNodeClaim(nc)
	}
	for _, node := range p.Nodes {
		if err := cluster.UpdateNode(ctx, node); err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
	}
	for _, pod := range p.Pods {
		if err := cluster.UpdatePod(ctx, pod); err != nil {
			return fmt.Errorf("pod %s: %w", pod.Name, err)
		}
	}
	provisioner := provisioning.NewProvisioner(kubeClient, recorder, cloudProvider, cluster, clk, nil, nil)
	queue := disruption.NewQueue(kubeClient, recorder, cluster, clk, provisioner)
	c := disruption.MakeConsolidation(clk, cluster, kubeClient, provisioner, cloudProvider, recorder, queue)
	validator := disruption.WithValidator(acceptAll{})
	methods := []disruption.Method{
		disruption.NewEmptiness(c, validator),
		disruption.NewStaticDrift(cluster, provisioner, cloudProvider),
		disruption.NewDrift(kubeClient, cluster, provisioner, recorder, clk),
		disruption.NewMultiNodeConsolidation(c, validator),
		disruption.NewSingleNodeConsolidation(c, validator),
	}
	loaded, cpuLoaded := time.Now(), cpuSeconds()

	out := decisionResult{Karpenter: karpenterVersion(), Go: runtime.Version(), Input: summarize(p, its),
		Nodes: len(p.Nodes), Candidates: map[string]int{}, MethodSeconds: map[string]float64{}, Decision: string(disruption.NoOpDecision),
		Disrupted: []candidateResult{}, Replacements: []claimResult{}}
	for _, method := range methods {
		label := fmt.Sprintf("%s/%s", method.Reason(), method.ConsolidationType())
		methodStarted := time.Now()
		candidates, totals, err := disruption.GetCandidatesWithTotals(ctx, cluster, kubeClient, recorder, clk,
			cloudProvider, method.ShouldDisrupt, method.Class(), queue, nil)
		if err != nil {
			return fmt.Errorf("%s: candidates: %w", label, err)
		}
		out.Candidates[label] = len(candidates)
		if len(candidates) == 0 {
			continue
		}
		if setter, ok := method.(disruption.NodePoolTotalsSetter); ok {
			setter.SetNodePoolTotals(totals)
		}
		budgets, err := disruption.BuildDisruptionBudgetMapping(ctx, cluster, clk, kubeClient, cloudProvider, recorder,
			method.Reason())
		if err != nil {
			return fmt.Errorf("%s: budgets: %w", label, err)
		}
		commands, err := method.ComputeCommands(ctx, budgets, candidates...)
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		commands = lo.Filter(commands, func(cmd disruption.Command, _ int) bool {
			return cmd.Decision() != disruption.NoOpDecision
		})
		out.MethodSeconds[label] = time.Since(methodStarted).Seconds()
		if len(commands) == 0 {
			continue
		}
		out.Method, out.Commands, out.Decision = label, len(commands), string(commands[0].Decision())
		zones, capacityTypes := offeringValues(its)
		for _, cmd := range commands {
			for _, candidate := range cmd.Candidates {
				out.Disrupted = append(out.Disrupted, candidateResult{Name: candidate.Name(), Price: candidate.Price})
				out.SavingsPerHour += candidate.Price
			}
			for _, replacement := range cmd.Replacements {
				claim := describeClaim(replacement.NodeClaim, zones, capacityTypes)
				out.Replacements = append(out.Replacements, claim)
				out.SavingsPerHour -= claim.Price
			}
		}
		break
	}
	decided, cpuDecided := time.Now(), cpuSeconds()
	out.ParseSeconds = parsed.Sub(started).Seconds()
	out.LoadSeconds = loaded.Sub(parsed).Seconds()
	out.DecideSeconds = decided.Sub(loaded).Seconds()
	out.DecideCPU = cpuDecided - cpuLoaded
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(resultPath, data, 0o644)
}
