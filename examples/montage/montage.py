"""Montage's tasks in miniature: each reads the files it is given and writes its own.

A tile `rRcC` of band B is an 8x8 patch of one sky, 6 pixels apart, so neighbours (and diagonals) overlap;
each tile carries its own background offset, which mDiffFit/mBgModel estimate and mBackground removes.

    python montage.py project BAND IMAGE OUT      mProject: the tile, sky + its offset
    python montage.py diff A B OUT                mDiffFit: mean difference of two tiles where they overlap
    python montage.py concat DIFFS OUT            mConcatFit: every fit of the band in one file
    python montage.py bgmodel FITS OUT            mBgModel: the offset of each tile (least squares, sum 0)
    python montage.py background TILE CORR OUT    mBackground: the tile with its offset removed
    python montage.py imgtbl TILES OUT            mImgtbl: the table of corrected tiles
    python montage.py add TABLE TILES OUT         mAdd: the band's mosaic, overlaps averaged
    python montage.py viewer PPM SUMMARY WORK     mViewer: the bands as one colour picture
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

SIZE, STEP = 8, 6  # tile edge and spacing in pixels: neighbours share 2 pixels


def write(path: str, data: object) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data))


def read(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def unit(*words: str) -> float:
    """A repeatable number in [0, 1) for words."""
    return int(hashlib.sha256(" ".join(words).encode()).hexdigest()[:8], 16) / 16**8


def position(image: str) -> tuple[int, int]:
    row, col = image[1:].split("c")
    return int(row), int(col)


def project(band: str, image: str, out: str) -> None:
    row, col = position(image)
    offset = 10 * unit(band, image) - 5
    pixels = [[100 + 10 * math.sin((col * STEP + x) / 7) + 5 * math.cos((row * STEP + y) / 5) + offset
               + 0.1 * unit(band, image, str(y), str(x)) for x in range(SIZE)] for y in range(SIZE)]
    write(out, {"band": band, "image": image, "row": row, "col": col, "offset": offset, "pixels": pixels})


def overlap(a: dict, b: dict) -> list[tuple[float, float]]:
    """(pixel of a, pixel of b) for each sky pixel both tiles cover."""
    pairs = []
    for y in range(SIZE):
        for x in range(SIZE):
            by, bx = y + (a["row"] - b["row"]) * STEP, x + (a["col"] - b["col"]) * STEP
            if 0 <= by < SIZE and 0 <= bx < SIZE:
                pairs.append((a["pixels"][y][x], b["pixels"][by][bx]))
    return pairs


def diff(first: str, second: str, out: str) -> None:
    a, b = read(first), read(second)
    shared = overlap(a, b)
    if not shared:
        sys.exit(f"{a['image']} and {b['image']} do not overlap")
    write(out, {"a": a["image"], "b": b["image"], "offset": sum(p - q for p, q in shared) / len(shared)})


def concat(diffs: str, out: str) -> None:
    write(out, [read(path) for path in sorted(Path(diffs).glob("*.json"))])


def bgmodel(fits: str, out: str) -> None:
    fitted = read(fits)
    images = sorted({fit[end] for fit in fitted for end in ("a", "b")})
    level = dict.fromkeys(images, 0.0)
    for _ in range(500):  # Gauss-Seidel on level[a] - level[b] = offset
        for image in images:
            terms = [level[f["b"]] + f["offset"] for f in fitted if f["a"] == image]
            terms += [level[f["a"]] - f["offset"] for f in fitted if f["b"] == image]
            level[image] = sum(terms) / len(terms)
        mean = sum(level.values()) / len(level)
        level = {image: value - mean for image, value in level.items()}
    write(out, level)


def background(tile: str, corrections: str, out: str) -> None:
    data, level = read(tile), read(corrections)[read(tile)["image"]]
    data["pixels"] = [[value - level for value in line] for line in data["pixels"]]
    data["correction"] = level
    write(out, data)


def imgtbl(tiles: str, out: str) -> None:
    rows = [{k: v for k, v in read(path).items() if k != "pixels"} | {"file": path.name}
            for path in sorted(Path(tiles).glob("*.json"))]
    write(out, rows)


def add(table: str, tiles: str, out: str) -> None:
    rows = read(table)
    height = max(r["row"] for r in rows) * STEP + SIZE
    width = max(r["col"] for r in rows) * STEP + SIZE
    total = [[0.0] * width for _ in range(height)]
    count = [[0] * width for _ in range(height)]
    for entry in rows:
        tile = read(Path(tiles) / entry["file"])
        for y, line in enumerate(tile["pixels"]):
            for x, value in enumerate(line):
                total[entry["row"] * STEP + y][entry["col"] * STEP + x] += value
                count[entry["row"] * STEP + y][entry["col"] * STEP + x] += 1
    pixels = [[t / c if c else 0.0 for t, c in zip(*lines, strict=True)] for lines in zip(total, count, strict=True)]
    write(out, {"band": rows[0]["band"], "tiles": len(rows), "pixels": pixels})


def viewer(ppm: str, summary: str, work: str) -> None:
    mosaics = [read(path) for path in sorted(Path(work).glob("*/mosaic.json"))]
    height = max(len(m["pixels"]) for m in mosaics)
    width = max(len(m["pixels"][0]) for m in mosaics)
    channels: list[list[list[int]]] = [[], [], []]  # red, green, blue: the first three bands
    for band, mosaic in enumerate(mosaics[:3]):
        values = [v for line in mosaic["pixels"] for v in line if v]
        low, high = min(values), max(values)
        channels[band] = [[round(255 * (line[x] - low) / (high - low)) if x < len(line) and line[x] else 0
                           for x in range(width)] for line in mosaic["pixels"]]
    lines = [f"P3 {width} {height} 255"]
    for y in range(height):
        lines.append(" ".join(str(c[y][x] if y < len(c) else 0) for x in range(width) for c in channels))
    Path(ppm).write_text("\n".join(lines) + "\n")
    write(summary, {m["band"]: {"tiles": m["tiles"], "height": len(m["pixels"])} for m in mosaics})


if __name__ == "__main__":
    globals()[sys.argv[1]](*sys.argv[2:])
