"""What of Karpenter v1.14's surface Adze implements and what it refuses: the one registry.

Every field of the three CRDs (by path in the generated schemas, ``[]`` for list items; an entry covers
every field under it unless a longer path has its own entry), every feature gate and every setting (the
core and AWS providers' environment variables, plus Adze's own) is either

- ``implemented``: naming the behaviour test that fails without it (``tests/...py::test_name``), maybe
  only with a feature gate on; or
- ``unsupported``: with the one line a user sees. A field set on an object gets a ``FieldsSupported=False``
  condition, an event, a log line and a plan/explain risk (``support_check.unsupported_fields``); a gate
  or setting given a value Adze does not honour stops start-up with that line (its upstream default is
  accepted, with a warning when Adze does not do what the default means).

``owner`` names the issue-26 work item that will implement an unsupported entry (for the maintainers;
not shown to users). ``tests/api/test_support_registry.py`` walks the schemas, the gate and settings
lists and the proofs, and checks ``docs/karpenter-compatibility.md`` against this file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

IMPLEMENTED = "implemented"
UNSUPPORTED = "unsupported"
LAUNCH = "parity-launch"  # issue 26 items 6 (AMI families' kubelet, RAID0) and 8 (EFA, networking, ...)


@dataclass(frozen=True, slots=True)
class Support:
    status: str
    proof: str = ""  # the behaviour test (implemented)
    message: str = ""  # unsupported: what Adze does not do, one line; implemented: an optional note
    gate: str = ""  # implemented only while this feature gate is on
    owner: str = ""
    # Unsupported only for objects this accepts (e.g. an AMI family); None: for every object.
    applies: Callable[[Mapping[str, Any]], bool] | None = None
    # A set value that changes nothing (the field's default): not reported.
    inert: Callable[[Any], bool] | None = None

    @property
    def implemented(self) -> bool:
        return self.status == IMPLEMENTED


def implemented(proof: str, *, gate: str = "", note: str = "") -> Support:
    return Support(IMPLEMENTED, proof=proof, message=note, gate=gate)


def unsupported(message: str, *, owner: str = "", applies: Callable[[Mapping[str, Any]], bool] | None = None,
                inert: Callable[[Any], bool] | None = None) -> Support:
    return Support(UNSUPPORTED, message=message, owner=owner, applies=applies, inert=inert)


# -- tests that prove behaviour (shared by several entries) ------------------------------------------------
_T = "tests/"
SCHED = _T + "scheduling/test_sched_basics.py::"
DRIFT = _T + "disruption/test_disruption_drift.py::"
RESERVATIONS_MOTO = _T + "cloud/aws/test_aws_reservations_moto.py::"
OVERLAY = _T + "cloud/test_cloud_overlay.py::"
OVERLAY_LIVE = _T + "controllers/test_ctrl_nodeoverlay.py::"
CONSOL = _T + "disruption/test_disruption_consolidation.py::"
BUDGETS = _T + "disruption/test_disruption_budgets.py::"
STATUS = _T + "controllers/test_ctrl_status.py::"
CONDS = _T + "controllers/test_ctrl_conditions.py::"
REGISTER = (_T + "lifecycle/test_launch_register.py::"
            "test_registration_syncs_labels_taints_and_initialization_waits_for_startup_taints")
LAUNCH_REQUEST = _T + "lifecycle/test_launch_register.py::test_launch_request_reads_nodeclaim_requirements"
PLANNED = _T + "provisioning/test_prov_plan.py::test_nodeclaim_manifest_is_complete"
MOTO = _T + "cloud/aws/test_aws_provider_moto.py::"
LAUNCH_OPTIONS = (_T + "cloud/aws/test_aws_launch_options.py::"
                  "test_launch_template_and_fleet_carry_the_nodeclass_launch_options")
ALLOCATABLE = _T + "cloud/aws/test_aws_allocatable.py::"
AWS_PURE = _T + "cloud/aws/test_aws_pure.py::"
CRDS = _T + "api/test_api_crds.py::"
FAMILIES = _T + "cloud/aws/test_aws_userdata_families.py::"
FEATURES = _T + "cloud/aws/test_aws_launch_features.py::"
NODECLASS_STATUS = MOTO + "test_nodeclass_status_resolves_subnets_groups_amis_and_profile"
TERMINATION_CONDITIONS = CONDS + "test_termination_sets_drained_volumes_detached_and_instance_terminating_in_order"
LAUNCHED = _T + "lifecycle/test_launch_register.py::test_launch_picks_cheapest_allowed_offering_and_records_status"

_CONDITIONS = implemented(CONDS + "test_a_claim_is_ready_once_launched_registered_and_initialized")
_API_OBJECT = implemented(CRDS + "test_metadata_is_left_to_the_api_server")

NODEPOOL: dict[str, Support] = {
    "apiVersion": _API_OBJECT,
    "kind": _API_OBJECT,
    "metadata": _API_OBJECT,
    "spec.template.metadata.labels": implemented(REGISTER),
    "spec.template.metadata.annotations": implemented(PLANNED),
    "spec.template.spec.taints": implemented(SCHED + "test_pods_must_tolerate_pool_taints_but_not_startup_taints"),
    "spec.template.spec.startupTaints": implemented(REGISTER),
    "spec.template.spec.requirements": implemented(
        SCHED + "test_node_selector_and_custom_labels_need_the_pool_to_define_them"),
    "spec.template.spec.requirements[].minValues": implemented(SCHED + "test_min_values_strict_and_best_effort"),
    "spec.template.spec.nodeClassRef": implemented(
        STATUS + "test_nodepool_without_its_nodeclass_is_not_ready_and_says_why"),
    "spec.template.spec.expireAfter": implemented(
        _T + "sim/test_sim_steps.py::test_expire_deletes_expired_claims_and_reprovisions_their_pods"),
    "spec.template.spec.terminationGracePeriod": implemented(
        _T + "lifecycle/test_termination_exec.py::test_termination_grace_period_force_deletes_a_do_not_disrupt_pod"),
    "spec.disruption.consolidateAfter": implemented(CONSOL + "test_consolidate_after_counts_from_the_last_pod_event"),
    "spec.disruption.consolidationPolicy": implemented(
        CONSOL + "test_when_empty_policy_leaves_busy_nodes_alone",
        note="Balanced: tests/disruption/test_disruption_balanced_order.py"),
    "spec.disruption.budgets[].nodes": implemented(BUDGETS + "test_count_and_percent_budgets_take_the_minimum"),
    "spec.disruption.budgets[].schedule": implemented(
        BUDGETS + "test_scheduled_zero_budget_blocks_only_inside_its_window"),
    "spec.disruption.budgets[].duration": implemented(
        BUDGETS + "test_scheduled_zero_budget_blocks_only_inside_its_window"),
    "spec.disruption.budgets[].reasons": implemented(BUDGETS + "test_reasons_scope_a_budget"),
    "spec.limits": implemented(SCHED + "test_nodepool_limits_count_existing_nodes_and_explain_the_block"),
    "spec.weight": implemented(SCHED + "test_pools_are_tried_by_weight_then_name_descending_never_by_price"),
    "spec.replicas": implemented(
        _T + "sim/test_static_nodepools.py::"
        "test_a_replicas_3_pool_runs_exactly_3_nodes_of_its_cheapest_type_and_is_never_consolidated",
        gate="StaticCapacity"),
    "status.conditions": implemented(STATUS + "test_nodepool_without_its_nodeclass_is_not_ready_and_says_why"),
    "status.resources": implemented(STATUS + "test_nodeclass_and_nodepool_become_ready_and_count_resources"),
    "status.nodes": implemented(STATUS + "test_nodeclass_and_nodepool_become_ready_and_count_resources"),
    "status.nodeClassObservedGeneration": implemented(
        CONDS + "test_node_registration_health_follows_registrations_and_resets_on_a_pool_change"),
}

NODECLAIM: dict[str, Support] = {
    "apiVersion": _API_OBJECT,
    "kind": _API_OBJECT,
    "metadata": _API_OBJECT,
    "spec.taints": implemented(REGISTER),
    "spec.startupTaints": implemented(REGISTER),
    "spec.requirements": implemented(LAUNCH_REQUEST),
    "spec.resources.requests": implemented(PLANNED),
    "spec.nodeClassRef": implemented(LAUNCH_REQUEST),
    "spec.terminationGracePeriod": implemented(
        _T + "lifecycle/test_drain_plan.py::test_termination_deadline_from_annotation_or_deletion_plus_tgp"),
    "spec.expireAfter": implemented(
        _T + "lifecycle/test_expiration_nodeclaims.py::test_expired_at_creation_plus_expire_after"),
    "status.conditions": _CONDITIONS,
    "status.nodeName": implemented(REGISTER),
    "status.providerID": implemented(LAUNCHED),
    "status.imageID": implemented(LAUNCHED),
    "status.capacity": implemented(LAUNCHED),
    "status.allocatable": implemented(LAUNCHED),
    "status.lastPodEventTime": implemented(
        STATUS + "test_pod_binding_stamps_last_pod_event_time_but_daemonset_pods_do_not"),
}

EC2NODECLASS: dict[str, Support] = {
    "apiVersion": _API_OBJECT,
    "kind": _API_OBJECT,
    "metadata": _API_OBJECT,
    "spec.subnetSelectorTerms": implemented(NODECLASS_STATUS),
    "spec.securityGroupSelectorTerms": implemented(NODECLASS_STATUS),
    "spec.capacityReservationSelectorTerms": implemented(
        RESERVATIONS_MOTO + "test_selector_terms_resolve_into_the_nodeclass_status", gate="ReservedCapacity",
        note="launch and consolidation: tests/sim/test_sim_reservations.py::"
             "test_targeted_reservation_is_launched_into_and_consolidation_keeps_it"),
    "spec.placementGroupSelector": implemented(
        FEATURES + "test_placement_group_selected_by_name_places_and_labels_the_nodes",
        note="partition placement groups are refused: PlacementGroupReady False, PlacementGroupStrategyUnsupported"),
    "spec.associatePublicIPAddress": implemented(LAUNCH_OPTIONS),
    "spec.ipPrefixCount": implemented(FEATURES + "test_prefixes_conntrack_and_public_ip_on_the_primary_interface"),
    "spec.amiSelectorTerms": implemented(
        NODECLASS_STATUS, note="ssmParameter: tests/cloud/aws/test_aws_policy_coverage.py"),
    "spec.amiFamily": implemented(AWS_PURE + "test_family_from_alias_or_field"),
    "spec.userData": implemented(
        _T + "cloud/aws/test_aws_userdata_merge.py::test_published_nodeclasses_render_with_their_user_data_kept"),
    "spec.role": implemented(NODECLASS_STATUS),
    "spec.instanceProfile": implemented(
        _T + "cloud/aws/test_aws_nodeclass_cleanup.py::test_a_profile_the_class_only_names_is_never_deleted"),
    "spec.tags": implemented(LAUNCH_OPTIONS),
    "spec.kubelet.maxPods": implemented(ALLOCATABLE + "test_max_pods_override_and_pods_per_core"),
    "spec.kubelet": implemented(
        FAMILIES + "test_every_kubelet_field_reaches_the_node_and_matches_the_allocatable_model",
        note="a field an AMI family would drop is refused: ValidationSucceeded False, UnsupportedKubeletConfiguration "
             "(tests/cloud/aws/test_aws_userdata_families.py::test_settings_a_family_would_drop_are_refused)"),
    "spec.blockDeviceMappings": implemented(LAUNCH_OPTIONS),
    "spec.instanceStorePolicy": implemented(FAMILIES + "test_raid0_assembles_the_instance_store_the_model_counts"),
    "spec.networkInterfaces": implemented(
        FEATURES + "test_nodeclass_network_interfaces_shape_templates_pods_and_compatibility",
        note="EFA requests: " + FEATURES + "test_an_efa_request_gets_one_efa_interface_per_efa_the_type_has"),
    "spec.detailedMonitoring": implemented(LAUNCH_OPTIONS),
    "spec.metadataOptions": implemented(LAUNCH_OPTIONS),
    "spec.connectionTracking": implemented(FEATURES + "test_prefixes_conntrack_and_public_ip_on_the_primary_interface"),
    "spec.context": implemented(LAUNCH_OPTIONS),
    "spec.cpuOptions.nestedVirtualization": implemented(
        FEATURES + "test_nested_virtualization_only_on_types_that_support_it"),
    "status.conditions": implemented(STATUS + "test_a_provider_that_resolves_nodeclasses_reports_their_status"),
    "status.subnets": implemented(NODECLASS_STATUS),
    "status.securityGroups": implemented(NODECLASS_STATUS),
    "status.capacityReservations": implemented(
        RESERVATIONS_MOTO + "test_selector_terms_resolve_into_the_nodeclass_status", gate="ReservedCapacity"),
    "status.amis": implemented(NODECLASS_STATUS),
    "status.instanceProfile": implemented(NODECLASS_STATUS),
}

# karpenter.sh/v1alpha1 NodeOverlay: served, and acted on only while the NodeOverlay gate is on.
NODEOVERLAY: dict[str, Support] = {
    "apiVersion": _API_OBJECT,
    "kind": _API_OBJECT,
    "metadata": _API_OBJECT,
    "spec.requirements": implemented(OVERLAY + "test_overlays_select_by_nodepool_and_its_labels", gate="NodeOverlay"),
    "spec.price": implemented(OVERLAY_LIVE + "test_an_overlay_price_decides_what_the_live_provisioner_launches",
                              gate="NodeOverlay"),
    "spec.priceAdjustment": implemented(OVERLAY + "test_a_percentage_overlay_on_a_family_and_capacity_type",
                                        gate="NodeOverlay"),
    "spec.capacity": implemented(OVERLAY + "test_capacity_adds_extended_resources_merged_by_weight",
                                 gate="NodeOverlay"),
    "spec.weight": implemented(OVERLAY + "test_the_heavier_overlay_sets_the_price", gate="NodeOverlay"),
    "status.conditions": implemented(OVERLAY_LIVE + "test_conflicting_overlays_get_a_false_condition",
                                     gate="NodeOverlay"),
}

FIELDS: dict[str, dict[str, Support]] = {
    "NodePool": NODEPOOL, "NodeClaim": NODECLAIM, "EC2NodeClass": EC2NODECLASS, "NodeOverlay": NODEOVERLAY,
}


@dataclass(frozen=True, slots=True)
class GateSupport:
    upstream_default: bool
    support: Support


# Karpenter v1.14 FEATURE_GATES (kubernetes-sigs/karpenter pkg/operator/options/options.go).
FEATURE_GATES: dict[str, GateSupport] = {
    "NodeRepair": GateSupport(False, implemented(
        _T + "controllers/test_ctrl_health.py::"
        "test_an_unhealthy_node_is_replaced_without_a_drain_past_its_toleration")),
    "ReservedCapacity": GateSupport(True, implemented(
        _T + "sim/test_sim_reservations.py::test_the_reserved_capacity_gate_off_ignores_reservations")),
    "SpotToSpotConsolidation": GateSupport(False, implemented(
        CONSOL + "test_spot_to_spot_needs_the_feature_gate")),
    "NodeOverlay": GateSupport(False, implemented(
        OVERLAY_LIVE + "test_an_overlay_price_decides_what_the_live_provisioner_launches")),
    "StaticCapacity": GateSupport(False, implemented(
        _T + "controllers/test_ctrl_static_capacity.py::"
        "test_keeps_exactly_the_replicas_follows_scaling_and_never_consolidates")),
    "CapacityBuffer": GateSupport(False, unsupported(
        "CapacityBuffer is not supported by Adze (no CapacityBuffer CRD or buffer controller): no buffer capacity is "
        "provisioned")),
}


@dataclass(frozen=True, slots=True)
class SettingSupport:
    upstream_default: str | None  # None: no default (or not a Karpenter setting)
    support: Support
    # Unsupported settings: the values that match what Adze does anyway (accepted silently); None = any value.
    honoured: frozenset[str] | None = frozenset()


def _honours(*values: str) -> frozenset[str]:
    return frozenset(values)


APP = _T + "controllers/test_ctrl_app.py::"
SUPPORT_SETTINGS = _T + "core/test_support_settings.py::"

SETTINGS: dict[str, SettingSupport] = {
    # -- kubernetes-sigs/karpenter pkg/operator/options (v1.14) --
    "KARPENTER_SERVICE": SettingSupport("", unsupported(
        "Adze serves no webhook, so it has no service name to use"), honoured=None),
    "METRICS_PORT": SettingSupport("8080", implemented(
        APP + "test_app_leads_serves_probes_and_metrics_and_releases_the_lease_on_stop")),
    "HEALTH_PROBE_PORT": SettingSupport("8081", implemented(
        APP + "test_app_leads_serves_probes_and_metrics_and_releases_the_lease_on_stop")),
    "KUBE_CLIENT_QPS": SettingSupport("200", implemented(
        _T + "kube/test_kube_rate_limit.py::test_karpenters_environment_variables_size_the_bucket")),
    "KUBE_CLIENT_BURST": SettingSupport("300", implemented(
        _T + "kube/test_kube_rate_limit.py::test_karpenters_environment_variables_size_the_bucket")),
    "ENABLE_PROFILING": SettingSupport("false", unsupported("profiling endpoints are not served"), _honours("false")),
    "DISABLE_CONTROLLER_WARMUP": SettingSupport("true", unsupported(
        "controller warm-up is not implemented: caches fill once leadership is won"), _honours("true")),
    "DISABLE_LEADER_ELECTION": SettingSupport("false", implemented(
        SUPPORT_SETTINGS + "test_disable_leader_election_runs_without_a_lease")),
    "DISABLE_CLUSTER_STATE_OBSERVABILITY": SettingSupport("false", unsupported(
        "cluster-state metrics and events cannot be turned off"), _honours("false")),
    "LEADER_ELECTION_NAME": SettingSupport("karpenter-leader-election", implemented(
        APP + "test_lease_defaults_are_karpenters")),
    "LEADER_ELECTION_NAMESPACE": SettingSupport("", implemented(APP + "test_lease_defaults_are_karpenters")),
    "MEMORY_LIMIT": SettingSupport("-1", unsupported(
        "no runtime memory limit to set (a Go GC setting); the container's limit applies"), honoured=None),
    "CPU_REQUESTS": SettingSupport("1000", unsupported(
        "scheduling simulations run on one core whatever the CPU request"), honoured=None),
    "LOG_LEVEL": SettingSupport("info", implemented(SUPPORT_SETTINGS + "test_log_level_filters_log_lines")),
    "LOG_OUTPUT_PATHS": SettingSupport("stdout", unsupported("logs go to stdout only"), _honours("stdout")),
    "LOG_ERROR_OUTPUT_PATHS": SettingSupport("stderr", unsupported(
        "error logs go to stdout with the others"), _honours("stdout")),
    "BATCH_MAX_DURATION": SettingSupport("10s", implemented(
        _T + "provisioning/test_prov_plan.py::test_batch_window_closes_after_idle_or_max")),
    "BATCH_IDLE_DURATION": SettingSupport("1s", implemented(
        _T + "provisioning/test_prov_plan.py::test_batch_window_closes_after_idle_or_max")),
    "PREFERENCE_POLICY": SettingSupport("Respect", implemented(
        SCHED + "test_preference_policy_ignore_never_considers_preferences")),
    "MIN_VALUES_POLICY": SettingSupport("Strict", implemented(SCHED + "test_min_values_strict_and_best_effort")),
    "IGNORE_DRA_REQUESTS": SettingSupport("true", unsupported(
        "Dynamic Resource Allocation is not scheduled: pods with resource claims are always ignored"),
        _honours("true")),
    "FEATURE_GATES": SettingSupport(None, implemented(
        SUPPORT_SETTINGS + "test_an_unimplemented_gate_stops_start_up_with_one_line")),
    # -- aws/karpenter-provider-aws pkg/operator/options (v1.14) --
    "CLUSTER_CA_BUNDLE": SettingSupport("", implemented(
        SUPPORT_SETTINGS + "test_cluster_endpoint_and_ca_bundle_stand_in_for_describe_cluster")),
    "CLUSTER_NAME": SettingSupport("", implemented(APP + "test_refuses_to_start_with_one_clear_line")),
    "CLUSTER_ENDPOINT": SettingSupport("", implemented(
        SUPPORT_SETTINGS + "test_cluster_endpoint_and_ca_bundle_stand_in_for_describe_cluster")),
    "ISOLATED_VPC": SettingSupport("false", implemented(
        _T + "controllers/test_ctrl_awsrefresh.py::test_isolated_vpcs_and_govcloud_keep_the_bundled_on_demand_prices")),
    "EKS_CONTROL_PLANE": SettingSupport("false", unsupported(
        "Adze always asks eks:DescribeCluster first (CLUSTER_ENDPOINT and CLUSTER_CA_BUNDLE are its fallback)"),
        _honours("true")),
    "VM_MEMORY_OVERHEAD_PERCENT": SettingSupport("0.075", implemented(
        ALLOCATABLE + "test_memory_capacity_subtracts_vm_overhead_and_graviton_cma")),
    "INTERRUPTION_QUEUE": SettingSupport("", implemented(
        _T + "interruption/test_interruption_consumer.py::"
        "test_spot_interruption_deletes_the_nodeclaim_and_marks_the_offering")),
    "RESERVED_ENIS": SettingSupport("0", implemented(ALLOCATABLE + "test_eni_limited_pods_matches_eks_max_pods_table")),
    "DISABLE_DRY_RUN": SettingSupport("false", implemented(
        _T + "cloud/aws/test_aws_validation.py::test_disable_dry_run_skips_the_checks")),
    "ENABLE_ZONAL_SHIFT": SettingSupport("false", unsupported("zonal shifts are not followed"), _honours("false")),
    "AMI_REFRESH_INTERVAL": SettingSupport("1m", unsupported(
        "AMIs are refreshed every minute; the interval cannot be changed"), _honours("1m", "60s")),
    "SUBNET_REFRESH_INTERVAL": SettingSupport("1m", unsupported(
        "subnets are refreshed every minute; the interval cannot be changed"), _honours("1m", "60s")),
    # -- Adze's own --
    "AWS_REGION": SettingSupport(None, implemented(
        APP + "test_in_karpenters_deployment_adze_reads_its_environment_and_campaigns_for_its_lease")),
    "AWS_DEFAULT_REGION": SettingSupport(None, implemented(
        SUPPORT_SETTINGS + "test_aws_default_region_names_the_region")),
    "SYSTEM_NAMESPACE": SettingSupport(None, implemented(APP + "test_lease_defaults_are_karpenters")),
    "WATCH_PROGRESS_DEADLINE": SettingSupport("2m", implemented(
        _T + "e2e/faults/test_fault_watches.py::test_silent_watches_are_noticed_relisted_and_new_pods_acted_on")),
    "REBALANCE_HANDLING": SettingSupport("event", implemented(
        _T + "interruption/test_interruption_consumer.py::test_rebalance_drain_mode_cordons_then_deletes")),
}
