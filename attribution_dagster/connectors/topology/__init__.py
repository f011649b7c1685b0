"""The `topology` role: where a cluster's fabric topology comes from (issue 23).

Configured per cluster in attribution.yaml as a list of `{kind: ...}` blocks, like `logs`
and `metrics` (docs/topology.md):

    topology:
      - {kind: files, paths: [/etc/slurm/topology.conf, /shared/fabric/ibnetdiscover.txt],
         snapshots: /shared/fabric/snapshots}
      - {kind: slurm_scontrol}
      - {kind: kubernetes_labels, kubeconfig: ~/.kube/config}

Every source returns `TopologySnapshots` (core/topology.py): snapshots with the time each
was taken. A job is read against the snapshot in force when it started, each source's
merged in the order configured. The readers themselves live in core/formats/topology/.
"""
