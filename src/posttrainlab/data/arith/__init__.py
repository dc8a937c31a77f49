"""arith-v1: the synthetic, checksummed arithmetic benchmark (seed card 002).

``build(version)`` generates a release in memory; ``prepare(out, version)`` writes it atomically and
``check(version, out)`` proves a rebuild is byte-identical to the committed golden manifest.
"""

from posttrainlab.data.arith.generator import LATEST, SPLITS, VERSIONS, build, draw_pools
from posttrainlab.data.arith.release import check, prepare

__all__ = ["LATEST", "SPLITS", "VERSIONS", "build", "check", "draw_pools", "prepare"]
