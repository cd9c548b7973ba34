"""Containers and Kubernetes pods as hosts: `ContainerHost` (host.py) reaches one through its
runtime's exec on a via host; target.py builds the runtime's argv, pipes.py carries the
resident program for a runtime on this machine, records.py reads what runtimes report."""

from sleuth.hosts.container.host import ContainerFacts, ContainerHost

__all__ = ["ContainerFacts", "ContainerHost"]
