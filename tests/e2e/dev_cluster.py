"""A throwaway cluster for running ``python -m reconciler run`` by hand (and for the process test).

Starts, in this process: the fake Kubernetes API server (HTTP), moto (EC2, SSM,
IAM, EKS) seeded like an EKS account, and the parts of a cluster Adze does not
own (kubelets that register a Node for every running instance, a scheduler, the
Deployment controller). Writes a kubeconfig, applies an EC2NodeClass, a
NodePool and a Deployment with pending pods, and prints the environment the
reconciler needs::

    python tests/e2e/dev_cluster.py --replicas 5
    # in another shell, paste the printed exports, then:
    python -m reconciler run

``--scale-to N --after S`` scales the Deployment to N replicas S seconds after
the first nodes are up, to watch consolidation.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]
for _path in (str(_TESTS), str(_TESTS / "controllers")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from ctrl_cluster import FakeCluster  # noqa: E402
from ctrl_objects import deployment  # noqa: E402
from e2e_rig import aws_provider, e2e_nodepool  # noqa: E402
from support.fake_apiserver import FakeApiServer  # noqa: E402

from reconciler.cloud.aws.offline import OfflineAWS, start_offline_aws  # noqa: E402
from reconciler.cloud.aws.provider import AWSCloudProvider  # noqa: E402
from reconciler.controllers.runtime.context import SystemClock  # noqa: E402
from reconciler.kube.api import DEPLOYMENT  # noqa: E402
from reconciler.sim.workloads import create_with_status  # noqa: E402

CLUSTER = "adze-dev"


@dataclass
class DevCluster:
    server: FakeApiServer
    aws: OfflineAWS
    observer: AWSCloudProvider
    kubeconfig: Path
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def env(self, metrics_port: int = 18080, health_port: int = 18081) -> dict[str, str]:
        """What the reconciler reads: Karpenter's variable names plus the AWS SDK's."""
        return {
            "KUBECONFIG": str(self.kubeconfig),
            "CLUSTER_NAME": self.aws.cluster,
            "AWS_REGION": self.aws.region,
            "AWS_ENDPOINT_URL": self.aws.endpoint_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "LEADER_ELECTION_NAMESPACE": "kube-system",
            "METRICS_PORT": str(metrics_port),
            "HEALTH_PROBE_PORT": str(health_port),
        }

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.observer.close()
        await self.server.stop()
        self.aws.stop()


async def start_dev_cluster(workdir: Path, replicas: int = 5, cluster: str = CLUSTER) -> DevCluster:
    aws = start_offline_aws(cluster=cluster)
    _register_eks_cluster(aws)
    server = FakeApiServer(bookmark_interval=1.0, pod_shutdown_seconds=0)
    await server.start()
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(json.dumps(server.kubeconfig()))
    for manifest in (aws.nodeclass(), e2e_nodepool(), deployment(replicas=replicas, cpu="1500m")):
        manifest["metadata"].pop("uid", None)
        await create_with_status(server.kube, manifest)
    observer = aws_provider(aws)
    dev = DevCluster(server, aws, observer, kubeconfig)
    surroundings = FakeCluster(server.kube, observer, SystemClock().now)
    dev.tasks.append(asyncio.create_task(surroundings.run(interval=0.2)))
    return dev


def _register_eks_cluster(aws: OfflineAWS) -> None:
    """So eks:DescribeCluster answers with the endpoint, CA bundle and version the node user data needs."""
    info = aws.cluster_info()
    aws.client("eks").create_cluster(
        name=aws.cluster,
        version=info.kubernetes_version,
        roleArn="arn:aws:iam::123456789012:role/eks-cluster",
        resourcesVpcConfig={"subnetIds": list(aws.subnet_ids.values())},
    )


async def _scale_later(dev: DevCluster, replicas: int, after: float) -> None:
    await asyncio.sleep(after)
    await dev.server.kube.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": replicas}}, "default")
    print(f"# scaled deployment/inflate to {replicas} replicas", flush=True)


async def _main(args: argparse.Namespace) -> None:
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    dev = await start_dev_cluster(workdir, replicas=args.replicas)
    if args.scale_to is not None:
        dev.tasks.append(asyncio.create_task(_scale_later(dev, args.scale_to, args.after)))
    print(f"# fake API server {dev.server.url}, moto {dev.aws.endpoint_url}; Ctrl-C to stop", flush=True)
    for key, value in dev.env().items():
        print(f"export {key}={value}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await dev.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=5)
    parser.add_argument("--scale-to", type=int)
    parser.add_argument("--after", type=float, default=60.0)
    parser.add_argument("--workdir", default="/tmp/adze-dev")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args))
    return 0




if __name__ == "__main__":
    sys.exit(main())
