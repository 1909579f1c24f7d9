"""What a conversion is asked for (`Settings`, checked once) and what marks its output: the
format's `VERSION` and the manifest, `convert.json`, written last into a complete OUT."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from corolla.errors import UserError

# Bump when the output of a conversion changes, so caches are not reused (2: copies are kept
# in one split).
VERSION = 2
MANIFEST = "convert.json"  # written last, inside the temporary folder: marks a complete OUT
FITS = ("crop", "pad")

# The largest image decoded, in megapixels, wherever a file from elsewhere is read (convert,
# the data check, train on a folder, predict and explain): any camera's photo (150 MP medium
# format, a 200 MP phone mode), not a file whose pixels take a machine's memory (a 0.9 MB PNG
# can declare 31000 x 31000, 961 MP, 2.9 GB decoded). Checked on the header, before decoding.
MAX_MEGAPIXELS = 200.0


@dataclass(frozen=True)
class Settings:
    image_sizes: tuple[int, ...] = (224,)
    fit: str = "crop"  # "crop": short side to S, centre crop; "pad": long side to S, padded
    quality: int = 95  # JPEG quality of the written images
    seed: int = 42  # the split and the order
    val_fraction: float = 0.2  # of the labelled images, when the source has no val split
    test_fraction: float = 0.0  # of the labelled images, when the source has no test split
    shard_mb: float = 150.0  # target file size: cloud storage reads 100-200 MB files best
    strict: bool = False  # the first unreadable image is an error (default: skip and list)
    workers: int = 0  # encoding processes; 0 = every core
    # The largest image read (`MAX_MEGAPIXELS`); --max-megapixels raises it for larger scans.
    max_megapixels: float = MAX_MEGAPIXELS
    dedupe: bool = False  # keep one image of each group of exact copies (see `Copies`)

    def check(self) -> Settings:
        if not self.image_sizes or any(s < 8 or s > 4096 for s in self.image_sizes):
            raise UserError(f"--image-size must be between 8 and 4096, got "
                            f"{', '.join(map(str, self.image_sizes)) or 'none'}")
        if self.fit not in FITS:
            raise UserError(f"--fit must be crop or pad, got {self.fit!r}")
        if not 1 <= self.quality <= 100:
            raise UserError(f"--quality must be between 1 and 100, got {self.quality}")
        if not (0 <= self.val_fraction < 1 and 0 <= self.test_fraction < 1
                and self.val_fraction + self.test_fraction < 1):
            raise UserError(f"--val-fraction ({self.val_fraction}) and --test-fraction "
                            f"({self.test_fraction}) must be in [0, 1) and leave some for train")
        if not self.shard_mb > 0:
            raise UserError(f"--shard-mb must be positive, got {self.shard_mb}")
        if not 0 <= self.seed < 2**32:  # what scikit-learn's and NumPy's generators take
            raise UserError(f"--seed must be an integer from 0 to {2**32 - 1}, got {self.seed}")
        if not self.max_megapixels > 0:
            raise UserError(f"--max-megapixels must be positive, got {self.max_megapixels}")
        if self.workers < 0:
            raise UserError(f"--workers must be 0 (every core) or a number of processes, got "
                            f"{self.workers}")
        return replace(self, image_sizes=tuple(sorted(set(self.image_sizes))))

    def key(self) -> dict:
        """What decides the output (not `strict` nor `workers`; nor `max_megapixels`, which
        only says which giant files are skipped, so that caches made before it stay valid)."""
        return {k: v for k, v in asdict(self).items()
                if k not in ("strict", "workers", "max_megapixels")}

