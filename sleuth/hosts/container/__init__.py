"""Containers and Kubernetes pods as hosts: `host.py` (ContainerHost) reaches one through its
runtime's exec on a via host; target.py builds the runtime's argv, pipes.py carries the
resident program for a runtime on this machine, records.py reads what runtimes report,
discover.py lists a host's containers. Nothing is imported here: ContainerHost loads paramiko,
which a local read must not pay for."""
