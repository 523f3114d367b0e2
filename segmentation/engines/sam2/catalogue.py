"""The official SAM 2, SAM 2.1 and EdgeTAM checkpoints: where they are published, how large they
are, their SHA-256, and how a setting names one of them.

``SAM2_CHECKPOINT`` takes a path, or a name resolved in the models folder: a size (``tiny``,
``small``, ``base_plus``, ``large``: SAM 2.1's), an official file's stem (``sam2.1_hiera_tiny``,
``sam2_hiera_large``...) or ``edgetam``. ``manage.py sam2_weights fetch SIZE`` puts the files
there.

Sources of the figures below (Meta publishes no hashes; its download script and README give the
URLs):

- URLs: ``checkpoints/download_ckpts.sh`` and ``sam2/build_sam.py`` (the Hugging Face repositories)
  in github.com/facebookresearch/sam2.
- SHA-256 and sizes of the SAM 2.1 files: the Git LFS pointers of huggingface.co/facebook/sam2.1-
  hiera-tiny and -small (hashes), and of the mirror huggingface.co/camenduru/sam2-1-hiera (hashes
  and sizes of all four); the same hashes are pinned against Meta's URLs in micro-sam
  (``micro_sam/v2/util.py``).
- SHA-256 and sizes of the SAM 2.0 files: the Git LFS pointers of huggingface.co/facebook/sam2-
  hiera-tiny (hash and size), -small and -base-plus (hashes), and of the mirrors
  huggingface.co/merve/sam2-hiera-base-plus and -large (hashes and sizes); the same hashes are
  pinned against Meta's URLs in micro-sam, and all four sizes are checked against Meta's URLs in
  download scripts of other projects (small's size is known from those only).
- EdgeTAM's ``edgetam.pt``: its URLs are the README's link (``checkpoints/`` of
  github.com/facebookresearch/EdgeTAM, a plain Git object there, not an LFS pointer, so its
  ``raw`` URL serves the bytes) and the file ``edgetam.pt`` of huggingface.co/facebook/EdgeTAM.
  Meta publishes no hash for it, and the Hugging Face repository's LFS pointer was not readable
  here; its SHA-256 and size are those pinned, from downloads of either URL, by several projects
  that agree (BoxMOT's ``edgetam.pt`` resolver against the Hugging Face URL; others against the
  GitHub file at commit 7711e012 and the Hugging Face revision f3a09791, two of them giving
  56,116,523 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SIZES = ("tiny", "small", "base_plus", "large", "edgetam")
VERSIONS = ("2.1", "2.0")
SOURCES = ("meta", "huggingface")
_META = {
    "2.1": "https://dl.fbaipublicfiles.com/segment_anything_2/092824/",
    "2.0": "https://dl.fbaipublicfiles.com/segment_anything_2/072824/",
}


_EDGETAM = {
    "meta": "https://github.com/facebookresearch/EdgeTAM/raw/main/checkpoints/edgetam.pt",
    "huggingface": "https://huggingface.co/facebook/EdgeTAM/resolve/main/edgetam.pt",
}


@dataclass(frozen=True)
class OfficialCheckpoint:
    version: str  # "2.1" or "2.0"; EdgeTAM's is SAM 2.0's design
    size: str  # one of SIZES
    bytes: int
    sha256: str

    @property
    def stem(self) -> str:
        if self.size == "edgetam":
            return "edgetam"
        return f"sam2.1_hiera_{self.size}" if self.version == "2.1" else f"sam2_hiera_{self.size}"

    @property
    def setting(self) -> str:
        """What ``SAM2_CHECKPOINT`` names it by."""
        return self.size if self.version == "2.1" or self.size == "edgetam" else self.stem

    @property
    def file_name(self) -> str:
        return f"{self.stem}.pt"

    def url(self, source: str = "meta") -> str:
        if self.size == "edgetam" and source in _EDGETAM:
            return _EDGETAM[source]
        if source == "meta":
            return _META[self.version] + self.file_name
        if source == "huggingface":
            repository = f"facebook/{self.stem.split('_hiera_')[0]}-hiera-"
            return (
                f"https://huggingface.co/{repository}{self.size.replace('_', '-')}"
                f"/resolve/main/{self.file_name}"
            )
        raise ValueError(f"unknown source {source!r}: one of {', '.join(SOURCES)}")


OFFICIAL = (
    OfficialCheckpoint(
        "2.1",
        "tiny",
        156008466,
        "7402e0d864fa82708a20fbd15bc84245c2f26dff0eb43a4b5b93452deb34be69",
    ),
    OfficialCheckpoint(
        "2.1",
        "small",
        184416285,
        "6d1aa6f30de5c92224f8172114de081d104bbd23dd9dc5c58996f0cad5dc4d38",
    ),
    OfficialCheckpoint(
        "2.1",
        "base_plus",
        323606802,
        "a2345aede8715ab1d5d31b4a509fb160c5a4af1970f199d9054ccfb746c004c5",
    ),
    OfficialCheckpoint(
        "2.1",
        "large",
        898083611,
        "2647878d5dfa5098f2f8649825738a9345572bae2d4350a2468587ece47dd318",
    ),
    OfficialCheckpoint(
        "2.0",
        "tiny",
        155906050,
        "65b50056e05bcb13694174f51bb6da89c894b57b75ccdf0ba6352c597c5d1125",
    ),
    OfficialCheckpoint(
        "2.0",
        "small",
        184309650,
        "95949964d4e548409021d47b22712d5f1abf2564cc0c3c765ba599a24ac7dce3",
    ),
    OfficialCheckpoint(
        "2.0",
        "base_plus",
        323493298,
        "d0bb7f236400a49669ffdd1be617959a8b1d1065081789d7bbff88eded3a8071",
    ),
    OfficialCheckpoint(
        "2.0",
        "large",
        897952466,
        "7442e4e9b732a508f80e141e7c2913437a3610ee0c77381a66658c3a445df87b",
    ),
    OfficialCheckpoint(
        "2.0",
        "edgetam",
        56116523,
        "ed2d4850b8792c239689b043c47046ec239b6e808a3d9b6ae676c803fd8780df",
    ),
)


def official_find(size: str, version: str = "2.1") -> OfficialCheckpoint:
    """The official file of ``size`` and ``version`` (EdgeTAM has one only); ValueError naming
    the choices if none."""
    for checkpoint in OFFICIAL:
        if checkpoint.size == size and (size == "edgetam" or checkpoint.version == version):
            return checkpoint
    if version not in VERSIONS:
        raise ValueError(f"unknown SAM 2 version {version!r}: one of {', '.join(VERSIONS)}")
    raise ValueError(f"unknown SAM 2 size {size!r}: one of {', '.join(SIZES)}")


def official_named(name: str) -> OfficialCheckpoint | None:
    """The official file a setting names: a size (SAM 2.1's), ``edgetam`` or a file's stem; None
    if neither."""
    for checkpoint in OFFICIAL:
        if name in (checkpoint.stem, checkpoint.setting):
            return checkpoint
    return None


def fetch_command(checkpoint: OfficialCheckpoint) -> str:
    """The command that puts ``checkpoint`` in the models folder."""
    version = "" if checkpoint.setting == checkpoint.size else " --version 2.0"
    return f"python manage.py sam2_weights fetch {checkpoint.size}{version}"


def checkpoint_resolve(value: str, models_dir: Path) -> Path:
    """The file ``SAM2_CHECKPOINT`` means: an official name's file in ``models_dir``, else the
    path as given. FileNotFoundError, with the command that fetches it, when it is missing."""
    official = official_named(value)
    path = models_dir / official.file_name if official is not None else Path(value)
    if path.is_file():
        return path
    if official is not None:
        raise FileNotFoundError(
            f"SAM 2 checkpoint {value!r} is not in {models_dir}: fetch it with "
            f"`{fetch_command(official)}`"
        )
    raise FileNotFoundError(f"checkpoint {value} does not exist")
