"""Builds a stand-in for the DALI_extra sets that DALI's checkpointing tests read, from the project's
real photos and video (``../shared/data``), in DALI_extra's layout. Run by ``run.sh``:

    python make_extra.py EXTRA_DIR SHARED_DATA_DIR

Every set is built once (a set whose folder exists is left as it is). Photos are linked or their
bytes stored as they are (never re-encoded); the video sets are short clips re-encoded from
``video/bigbuckbunny.mp4`` at a small size; the labels, COCO boxes and polygons are made up (the
tests compare a pipeline with its restored copy, not with known values).
"""

from __future__ import annotations

import io
import json
import struct
import sys
import tarfile
from pathlib import Path

import numpy as np
from PIL import Image

from jaxdali.ops.readers.caffe import INT32, STRING, encode_datum, encode_tensor, encode_tensor_protos
from jaxdali.ops.readers.tfrecord_format import encode_example, write_tfrecord

FLOWER_CLASSES = ("daisy", "dandelion", "roses", "sunflowers", "tulips")
VIDEO_SIZE = (160, 96)  # small frames keep the 100+ video tests quick


def photos(shared: Path, count: int) -> list[tuple[Path, int]]:
    """``count`` photos taken in turn from each flower class, with the class index as label."""
    by_class = [sorted((shared / "flowers" / name).glob("*.jpg")) for name in FLOWER_CLASSES]
    return [(by_class[i % 5][i // 5], i % 5) for i in range(count)]


def build(folder: Path, make) -> None:
    """Runs ``make(tmp)`` into a temporary folder renamed to ``folder`` when done (so a failed build
    leaves nothing that looks complete)."""
    if folder.exists():
        return
    tmp = folder.with_name(folder.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    make(tmp)
    tmp.rename(folder)
    print(f"built {folder}")


def single_jpeg(out: Path, shared: Path) -> None:
    """db/single/jpeg/<class>/*.jpg: 47 photos in 5 numbered classes (the count and the folder "134"
    DALI's tests assume), linked."""
    for (flower, cls, count) in (("daisy", 100, 10), ("dandelion", 113, 10), ("roses", 134, 10),
                                 ("sunflowers", 137, 10), ("tulips", 155, 7)):
        (out / str(cls)).mkdir()
        for photo in sorted((shared / "flowers" / flower).glob("*.jpg"))[:count]:
            (out / str(cls) / photo.name).symlink_to(photo)


def coco(out: Path, shared: Path) -> None:
    """db/coco/images/*.jpg (64 linked photos) and instances.json: 1-3 made-up boxes per photo, each
    with a polygon inside it."""
    (out / "images").mkdir()
    rng = np.random.default_rng(0)
    images, annotations = [], []
    for image_id, (photo, label) in enumerate(photos(shared, 64), start=1):
        (out / "images" / photo.name).symlink_to(photo)
        with Image.open(photo) as im:
            width, height = im.size
        images.append({"id": image_id, "file_name": photo.name, "width": width, "height": height})
        for _ in range(int(rng.integers(1, 4))):
            w, h = float(rng.uniform(0.2, 0.5) * width), float(rng.uniform(0.2, 0.5) * height)
            x, y = float(rng.uniform(0, width - w)), float(rng.uniform(0, height - h))
            polygon = [x, y + h / 2, x + w / 2, y, x + w, y + h / 2, x + w / 2, y + h]
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": label + 1,
                                "bbox": [x, y, w, h], "segmentation": [polygon], "area": w * h / 2,
                                "iscrowd": 0})
    categories = [{"id": i + 1, "name": name} for i, name in enumerate(FLOWER_CLASSES)]
    (out / "instances.json").write_text(json.dumps(
        {"images": images, "annotations": annotations, "categories": categories}))


def tfrecord(out: Path, shared: Path) -> None:
    """db/tfrecord/train and train.idx: 60 Examples with image/encoded and image/class/label."""
    records = [encode_example({"image/encoded": photo.read_bytes(), "image/class/label": [label]})
               for photo, label in photos(shared, 60)]
    rows = write_tfrecord(str(out / "train"), records)
    (out / "train.idx").write_text("".join(f"{offset} {size}\n" for offset, size in rows.tolist()))


def lmdb_set(out: Path, values: list[bytes]) -> None:
    import lmdb

    with lmdb.open(str(out), map_size=1 << 28) as env, env.begin(write=True) as txn:
        for i, value in enumerate(values):
            txn.put(f"{i:08d}".encode(), value)


def caffe(out: Path, shared: Path) -> None:
    """db/lmdb: 64 Caffe Datums (encoded photo, label)."""
    lmdb_set(out, [encode_datum(photo.read_bytes(), label) for photo, label in photos(shared, 64)])


def caffe2(out: Path, shared: Path) -> None:
    """db/c2lmdb: 64 Caffe2 TensorProtos (STRING photo, INT32 label)."""
    lmdb_set(out, [encode_tensor_protos([encode_tensor(STRING, strings=[photo.read_bytes()]),
                                         encode_tensor(INT32, ints=[label])])
                   for photo, label in photos(shared, 64)])


def webdataset(out: Path, shared: Path) -> None:
    """db/webdataset/MNIST/devel-{0,1,2}.tar: 600 samples each (DALI's tests shard them up to 6 ways
    in batches of 64), ``.jpg`` (MNIST-like 28x28 grayscale JPEGs: every photo shrunk, then 9
    crops of it) and ``.cls``."""
    samples = []
    for photo, label in photos(shared, 200):
        with Image.open(photo) as im:
            small = im.convert("L").resize((36, 36))
        for k in range(9):
            buf = io.BytesIO()
            small.crop((k % 3 * 4, k // 3 * 4, k % 3 * 4 + 28, k // 3 * 4 + 28)).save(buf, "JPEG", quality=90)
            samples.append((buf.getvalue(), label))
    for shard in range(3):
        with tarfile.open(out / f"devel-{shard}.tar", "w") as tar:
            for i in range(shard * 600, (shard + 1) * 600):
                for ext, data in (("jpg", samples[i][0]), ("cls", str(samples[i][1]).encode())):
                    info = tarfile.TarInfo(f"sample{i:06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


def numpy_slices(out: Path, shared: Path) -> None:
    """db/3D/MRI/Knee/npy_2d_slices/STU00001/SER00001/*.npy: 120 grayscale 96x96 slices of photos."""
    series = out / "SER00001"
    series.mkdir()
    for i, (photo, _) in enumerate(photos(shared, 120)):
        with Image.open(photo) as im:
            np.save(series / f"{i}.npy", np.asarray(im.convert("L").resize((96, 96))))


def recordio(out: Path, shared: Path) -> None:
    """db/recordio/train.rec and train.idx (MXNet RecordIO): 40 records of header and photo."""
    magic = 0xCED7230A
    index = []
    with open(out / "train.rec", "wb") as rec:
        for i, (photo, label) in enumerate(photos(shared, 40)):
            payload = struct.pack("<IfQQ", 0, float(label), i, 0) + photo.read_bytes()
            index.append(f"{i}\t{rec.tell()}\n")
            rec.write(struct.pack("<II", magic, len(payload)) + payload + b"\0" * (-len(payload) % 4))
    (out / "train.idx").write_text("".join(index))


def video_frames(shared: Path, count: int) -> list[np.ndarray]:
    """The first ``count`` frames of the shared video, RGB, at VIDEO_SIZE."""
    import av

    frames = []
    with av.open(str(shared / "video" / "bigbuckbunny.mp4")) as container:
        for frame in container.decode(video=0):
            frames.append(frame.to_ndarray(format="rgb24", width=VIDEO_SIZE[0], height=VIDEO_SIZE[1]))
            if len(frames) == count:
                break
    return frames


def write_video(path: Path, frames: list[np.ndarray], durations: list[int]) -> None:
    """H.264 MP4 of ``frames``; frame i lasts ``durations[i]`` ms (uneven: a variable frame rate)."""
    import av
    from fractions import Fraction

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = VIDEO_SIZE[0], VIDEO_SIZE[1], "yuv420p"
        stream.codec_context.time_base = Fraction(1, 1000)
        stream.options = {"bf": "0"}
        pts = 0
        for array, duration in zip(frames, durations):
            frame = av.VideoFrame.from_ndarray(array, format="rgb24")
            frame.pts, frame.time_base = pts, Fraction(1, 1000)
            pts += duration
            container.mux(stream.encode(frame))
        container.mux(stream.encode())


def small_videos(out: Path, shared: Path) -> None:
    """db/video/small/small{0..4}.mp4: 30 frames each at 25 fps, from successive parts of the video."""
    frames = video_frames(shared, 130)
    for i in range(5):
        write_video(out / f"small{i}.mp4", frames[i * 25:i * 25 + 30], [40] * 30)


def vfr_videos(out: Path, shared: Path) -> None:
    """db/video/vfr/test_{1,2}.mp4: 40 frames each, frame durations alternating 40 and 80 ms."""
    frames = video_frames(shared, 80)
    for i in (1, 2):
        write_video(out / f"test_{i}.mp4", frames[(i - 1) * 40:i * 40], [40, 80] * 20)


def sequence_frames(out: Path, shared: Path) -> None:
    """db/sequence/frames/{0,1}/NNNNN.jpg: two streams of 30 video frames as JPEG files."""
    frames = video_frames(shared, 60)
    for stream in range(2):
        (out / str(stream)).mkdir()
        for i, array in enumerate(frames[stream * 30:(stream + 1) * 30]):
            Image.fromarray(array).save(out / str(stream) / f"{i:05d}.jpg", quality=90)


def nemo_wavs(out: Path, shared: Path) -> None:
    """db/audio/wav/*.wav: eighty 1-second clips of the video's sound track, 0.05 s apart (DALI's sharded
    reader tests need a few samples per shard), 16 kHz mono 16-bit PCM."""
    import av
    import wave

    with av.open(str(shared / "video" / "bigbuckbunny.mp4")) as container:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=16000)
        pcm = np.concatenate([f.to_ndarray().reshape(-1) for frame in container.decode(audio=0)
                              for f in resampler.resample(frame)])
    for i in range(80):
        with wave.open(str(out / f"clip{i}.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(pcm[i * 800:i * 800 + 16000].astype("<i2").tobytes())


SETS = {
    "db/single/jpeg": single_jpeg,
    "db/coco": coco,
    "db/tfrecord": tfrecord,
    "db/lmdb": caffe,
    "db/c2lmdb": caffe2,
    "db/webdataset/MNIST": webdataset,
    "db/3D/MRI/Knee/npy_2d_slices/STU00001": numpy_slices,
    "db/recordio": recordio,
    "db/video/small": small_videos,
    "db/video/vfr": vfr_videos,
    "db/sequence/frames": sequence_frames,
    "db/audio/wav": nemo_wavs,
}


def main(extra: str, shared: str) -> None:
    shared_path = Path(shared).resolve()
    for relative, make in SETS.items():
        build(Path(extra) / relative, lambda out, make=make: make(out, shared_path))


if __name__ == "__main__":
    main(*sys.argv[1:])
