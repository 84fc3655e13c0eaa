"""The corpus both adapter suites search: river animals, and one RESTRICTED document written
to win every query if it ever leaked (R1)."""

from __future__ import annotations

from ragspine import Document

MARKER = "ZEPHYR-VAULT-7731"
CORPUS = [
    Document("otter-diet", "The river otter eats fish, frogs and crayfish.", title="Otter diet",
             metadata={"animal": "otter", "year": 2021}),
    Document("otter-dens", "River otters dig dens called holts in the river bank.",
             title="Otter dens", metadata={"animal": "otter", "year": 2019}),
    Document("otter-play", "Young otters play and slide along the muddy river shore.",
             title="Otter play", metadata={"animal": "otter", "year": 2023}),
    Document("beaver-dams", "Beavers build dams across a river with branches and mud.",
             title="Beaver dams", metadata={"animal": "beaver", "year": 2020}),
    Document("beaver-teeth", "A beaver's orange teeth never stop growing.",
             title="Beaver teeth", metadata={"animal": "beaver", "year": 2018}),
    Document("heron", "The grey heron waits still in the shallow river for fish.",
             title="Heron", metadata={"animal": "heron", "year": 2022}),
    Document("kingfisher", "A kingfisher dives from a branch above the river to catch fish.",
             title="Kingfisher", metadata={"animal": "kingfisher", "year": 2020}),
    Document("trout", "Brown trout hide under the river bank in deep pools.",
             title="Trout", metadata={"animal": "trout", "year": 2017}),
    Document("secret", f"River otter fish river otter den {MARKER} river otter beaver river.",
             title=f"Secret {MARKER}", metadata={"animal": "vault", "code": MARKER},
             sensitivity="RESTRICTED"),
]  # fmt: skip
QUERY = "river otter fish"
