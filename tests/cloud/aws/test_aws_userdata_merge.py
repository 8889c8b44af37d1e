"""The user's ``spec.userData`` merged with Karpenter's bootstrap per family, on Karpenter's published
EC2NodeClasses (``/work/shared/data/karpenter-examples/v1``) and on hand-made edge cases."""

from __future__ import annotations

import email
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_aws_userdata_families import render_for
from userdata_readback import al2_bootstrap, bottlerocket_settings, mime_parts, nodeadm_config, windows_bootstrap

from reconciler.api.amifamily import family_of_nodeclass, unsupported_settings
from reconciler.cloud.aws.userdata import UserDataError

EXAMPLES = Path("/work/shared/data/karpenter-examples/v1")


def example_nodeclasses() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") == "EC2NodeClass":
                found.append((path.stem, document))
    return found


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="Karpenter's published examples are not on this machine")
@pytest.mark.parametrize(("example", "manifest"), example_nodeclasses(), ids=lambda v: v if isinstance(v, str) else "")
def test_published_nodeclasses_render_with_their_user_data_kept(example: str, manifest: dict[str, Any]) -> None:
    family = family_of_nodeclass(manifest)
    assert unsupported_settings(family, manifest["spec"]) == [], "a published example must not be refused"
    text, _ = render_for(manifest, "m5.large")
    custom = manifest["spec"].get("userData")
    if family.name == "Custom":
        assert text == custom
    elif family.name in ("AL2", "AL2023"):
        parts = mime_parts(text)
        # The user's parts first, unchanged and in order; Karpenter's bootstrap last.
        if custom:
            theirs = [(p.get_content_type(), str(p.get_payload()).strip())
                      for p in email.message_from_string(custom).get_payload()]
            assert [(t, b.strip()) for t, b in parts[:-1]] == theirs
        assert parts[-1][0] == ("text/x-shellscript" if family.name == "AL2" else "application/node.eks.aws")
        if family.name == "AL2":
            assert al2_bootstrap(text)[0][:2] == ["/etc/eks/bootstrap.sh", "demo"]
        else:
            spec = nodeadm_config(text)["_spec"]
            assert spec["cluster"]["name"] == "demo"
            if manifest["spec"].get("instanceStorePolicy") == "RAID0":
                assert spec["instance"]["localStorage"]["strategy"] == "RAID0"
    elif family.name == "Bottlerocket":
        settings = bottlerocket_settings(text)["_settings"]
        assert settings["kubernetes"]["cluster-name"] == "demo"
        if custom:
            assert settings["kubernetes"]["kube-api-qps"] == 30  # br-custom-userdata's own setting survives
    else:
        assert text.startswith("<powershell>\n") and text.rstrip().endswith("</powershell>")
        assert windows_bootstrap(text)["maxPods"] == 110
        for line in (custom or "").splitlines():
            assert line in text.split("[string]$EKSBootstrapScriptFile")[0]


def nodeclass(family_alias: str, user_data: str) -> dict[str, Any]:
    return {"metadata": {"name": "nc"}, "spec": {"amiSelectorTerms": [{"alias": family_alias}], "userData": user_data}}


def test_mime_parts_keep_their_own_headers() -> None:
    custom = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="==X=="\n\n'
        '--==X==\nContent-Type: text/cloud-config; charset="us-ascii"\nContent-Transfer-Encoding: 7bit\n\n'
        "#cloud-config\npackages: [jq]\n"
        "--==X==--\n"
    )
    text, _ = render_for(nodeclass("al2@latest", custom), "m5.large")
    first = email.message_from_string(text).get_payload()[0]
    assert first["Content-Transfer-Encoding"] == "7bit" and first.get_content_type() == "text/cloud-config"
    assert "packages: [jq]" in first.get_payload()


@pytest.mark.parametrize(
    ("custom", "content_type"),
    [
        ("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 42\n",
         "application/node.eks.aws"),
        ("#!/bin/bash\necho hello\n", "text/x-shellscript"),
    ],
)
def test_al2023_plain_user_data_becomes_a_part_of_its_kind(custom: str, content_type: str) -> None:
    text, _ = render_for(nodeclass("al2023@latest", custom), "m5.large")
    parts = mime_parts(text)
    assert [t for t, _ in parts] == [content_type, "application/node.eks.aws"]
    assert parts[0][1].strip() == custom.strip()


def test_al2_plain_user_data_runs_as_a_shell_script_before_bootstrap() -> None:
    text, _ = render_for(nodeclass("al2@latest", "echo hi"), "m5.large")
    assert next((t, b.strip()) for t, b in mime_parts(text)) == ("text/x-shellscript", "echo hi")


@pytest.mark.parametrize("alias", ["al2@latest", "al2023@latest"])
def test_unreadable_mime_user_data_is_refused_by_name(alias: str) -> None:
    with pytest.raises(UserDataError, match=r"spec\.userData: MIME user data must be multipart"):
        render_for(nodeclass(alias, "MIME-Version: 1.0\nContent-Type: text/plain\n\nhello\n"), "m5.large")


def test_bottlerocket_keeps_user_settings_but_not_user_taints() -> None:
    custom = (
        "[settings.kubernetes]\napi-server = 'replaceme'\nmax-pods = 999\n"
        "[settings.kubernetes.node-taints]\nreplace = ['me:NoSchedule']\n"
        "[settings.network]\nhosts = [['10.0.0.0', ['a.example', 'b.example']]]\n"
    )
    settings = bottlerocket_settings(render_for(nodeclass("bottlerocket@latest", custom), "m5.large")[0])["_settings"]
    assert settings["kubernetes"]["api-server"] == "https://api.example"
    assert settings["kubernetes"]["max-pods"] == 29
    # A taint only the user data knew would be invisible to scheduling: Karpenter's taints replace them.
    assert settings["kubernetes"]["node-taints"] == {"karpenter.sh/unregistered": [":NoExecute"]}
    assert settings["network"]["hosts"] == [["10.0.0.0", ["a.example", "b.example"]]]
    with pytest.raises(UserDataError, match=r"spec\.userData: not valid Bottlerocket TOML"):
        render_for(nodeclass("bottlerocket@latest", "[settings\n"), "m5.large")
