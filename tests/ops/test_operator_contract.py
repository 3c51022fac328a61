"""The operator contract, checked for EVERY registered operator (``jaxdali.ops.schema.registry()``).

For each operator: its schema is complete and documented; an unknown argument and a wrongly typed
argument are refused with errors that name the operator and the argument; the checkpoint
fingerprint of a pipeline holding it is the same for two builds and after a batch; and, where the
schema allows ``gpu``, the device placement gives the same values as the host one.

How an operator is built: by default from its schema alone, over a batch of real photos (uint8 HWC,
an ``external_source``), with the values of ``REQUIRED_VALUES`` for its required arguments; most
operators need nothing more. ``CASES`` gives the inputs of operators that take other data (readers,
decoders, arithmetic, video), written here with jaxdali's own format writers where a reader needs
them. An operator that fits neither fails with a message saying to add an entry.

Exemptions are explicit, per operator and per check, with their reason: ``NARROWED_ON_DEVICE`` lists the
operators whose 64-bit outputs the device holds as 32-bit (JAX's default), compared value for value.
"""

from __future__ import annotations

import dataclasses
import glob
import io
import json
import os
import pathlib
import tarfile
from typing import Any, Callable

import jax
import numpy as np
import pytest
from PIL import Image

from jaxdali import fn, pipeline_def, tfrecord, types
from jaxdali.ops import conditional as conditional_ops
from jaxdali.ops.operator import Operator
from jaxdali.ops.readers import caffe, recordio_format, tfrecord_format
from jaxdali.ops.schema import REQUIRED, OpSchema, registry
from jaxdali.ops.graph import add_op
from jaxdali.pipeline.device_stage import narrow_for_jax
from jaxdali.tools import tfrecord2idx
from tests.audio_clips import chirp, wav_bytes

lmdb = pytest.importorskip("lmdb")
array_record_module = pytest.importorskip("array_record.python.array_record_module")

SHARED = pathlib.Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
FLOWERS = SHARED / "flowers"
VIDEO = SHARED / "video" / "bigbuckbunny.mp4"
BATCH = 3
UNKNOWN_ARGUMENT = "no_such_argument"


# -- the data every case can use -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Data:
    """Real photos (decoded and as files) and small files in the formats the readers read."""

    photos: tuple[np.ndarray, ...]
    photo_files: tuple[str, ...]
    npy_files: tuple[str, ...]
    tar: str
    coco_root: str
    coco_annotations: str
    caffe_lmdb: str
    caffe2_lmdb: str
    tfrecord: str
    tfrecord_index: str
    array_record: str
    mxnet_rec: str = ""
    mxnet_idx: str = ""
    frame_streams: str = ""
    nemo_manifest: str = ""
    fits_files: tuple[str, ...] = ()


def _photo_files() -> list[str]:
    return sorted(glob.glob(str(FLOWERS / "daisy" / "*.jpg")))[:BATCH]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Data:
    files = _photo_files()
    if len(files) < BATCH:
        pytest.skip(f"the shared photos are missing under {FLOWERS}")
    folder = tmp_path_factory.mktemp("contract")
    # Real photos, reduced to keep the run short; their sizes differ (a ragged batch).
    photos = []
    for path in files:
        with Image.open(path) as im:
            photos.append(np.asarray(im.convert("RGB").reduce(4)))
    npy_files = []
    for i, photo in enumerate(photos):
        npy_files.append(str(folder / f"{i}.npy"))
        np.save(npy_files[-1], photo)
    tar = str(folder / "shards.tar")
    with tarfile.open(tar, "w") as archive:
        for i, path in enumerate(files):
            archive.add(path, arcname=f"{i:04d}.jpg")
            label = folder / f"{i:04d}.cls"
            label.write_text(str(i))
            archive.add(str(label), arcname=label.name)
    annotations = {
        "images": [{"id": i + 1, "file_name": os.path.basename(p), "width": int(ph.shape[1]) * 4,
                    "height": int(ph.shape[0]) * 4} for i, (p, ph) in enumerate(zip(files, photos))],
        "annotations": [{"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": [1.0, 2.0, 10.0, 20.0],
                         "area": 200.0, "iscrowd": 0} for i in range(len(files))],
        "categories": [{"id": 1, "name": "daisy"}],
    }
    coco_annotations = folder / "instances.json"
    coco_annotations.write_text(json.dumps(annotations))
    jpegs = [pathlib.Path(path).read_bytes() for path in files]
    caffe_lmdb = _write_lmdb(folder / "caffe", [caffe.encode_datum(jpeg, i) for i, jpeg in enumerate(jpegs)])
    caffe2_lmdb = _write_lmdb(folder / "caffe2", [caffe.encode_tensor_protos([
        caffe.encode_tensor(4, strings=[jpeg]), caffe.encode_tensor(2, ints=[i])]) for i, jpeg in enumerate(jpegs)])
    records = str(folder / "photos.tfrecord")
    tfrecord_format.write_tfrecord(records, [tfrecord_format.encode_example({"image": jpeg, "label": [i]})
                                             for i, jpeg in enumerate(jpegs)])
    records_index = str(folder / "photos.idx")
    assert tfrecord2idx.main([records, records_index]) == 0
    array_record = str(folder / "photos.array_record")
    writer = array_record_module.ArrayRecordWriter(array_record, "group_size:1")
    for jpeg in jpegs:
        writer.write(jpeg)
    writer.close()
    mxnet_rec, mxnet_idx = str(folder / "photos.rec"), str(folder / "photos.idx2")
    recordio_format.write_recordio(mxnet_rec, [recordio_format.encode_record(i, jpeg) for i, jpeg in enumerate(jpegs)],
                                   mxnet_idx)
    streams = folder / "streams"
    for i, photo in enumerate(photos):  # two streams of equal-sized frames
        (streams / str(i % 2)).mkdir(parents=True, exist_ok=True)
        Image.fromarray(photo).resize((32, 24)).save(streams / str(i % 2) / f"{i:03d}.png")
    nemo_manifest = folder / "speech.json"
    for i, wav in enumerate(WAVS):
        (folder / f"speech{i}.wav").write_bytes(wav.tobytes())
    nemo_manifest.write_text("".join(json.dumps({"audio_filepath": str(folder / f"speech{i}.wav"), "text": f"clip {i}"})
                                     + "\n" for i in range(len(WAVS))))
    fits_files = []
    for i, photo in enumerate(photos):
        fits_files.append(str(folder / f"{i}.fits"))
        pathlib.Path(fits_files[-1]).write_bytes(_fits_bytes(photo[:, :, 0].astype(np.int16)))
    return Data(tuple(photos), tuple(files), tuple(npy_files), tar, os.path.dirname(files[0]),
                str(coco_annotations), caffe_lmdb, caffe2_lmdb, records, records_index, array_record,
                mxnet_rec=mxnet_rec, mxnet_idx=mxnet_idx, frame_streams=str(streams), nemo_manifest=str(nemo_manifest),
                fits_files=tuple(fits_files))


def _fits_bytes(image: np.ndarray) -> bytes:
    """A FITS file: an empty primary HDU, then ``image`` (int16) as an image extension."""
    def header(*cards: str) -> bytes:
        text = "".join(c.ljust(80) for c in (*cards, "END"))
        return text.ljust(-(-len(text) // 2880) * 2880).encode("ascii")

    axes = [f"{'NAXIS' + str(k + 1):<8}= {n:>20}" for k, n in enumerate(image.shape[::-1])]
    data = image.astype(">i2").tobytes()
    return (header("SIMPLE  = " + "T".rjust(20), "BITPIX  = " + "16".rjust(20), "NAXIS   = " + "0".rjust(20))
            + header("XTENSION= 'IMAGE   '", "BITPIX  = " + "16".rjust(20), f"NAXIS   = {image.ndim:>20}", *axes,
                     "PCOUNT  = " + "0".rjust(20), "GCOUNT  = " + "1".rjust(20))
            + data + bytes(-len(data) % 2880))


def _write_lmdb(path: pathlib.Path, values: list[bytes]) -> str:
    env = lmdb.open(str(path), map_size=1 << 26)
    with env.begin(write=True) as txn:
        for i, value in enumerate(values):
            txn.put(f"{i:08d}".encode(), value)
    env.close()
    return str(path)


@pytest.fixture(autouse=True)
def _dumped_files_in_a_temporary_folder(request, tmp_path, monkeypatch):
    """fn.dump_image writes into the working directory: for its cases, a temporary one."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("name") == "dump_image":
        monkeypatch.chdir(tmp_path)


# -- how each operator is built ------------------------------------------------------------------

# Values for required arguments, by argument name, used by the default case.
REQUIRED_VALUES: dict[str, Any] = {
    "dtype": types.FLOAT,
    "angle": 30.0,
    "size": [24, 32],
}


@dataclasses.dataclass(frozen=True)
class Case:
    """How to call one operator: ``make(photos_node, data, device)`` gives its positional inputs,
    ``kwargs`` its arguments. ``device`` is "cpu" or the device placement under test ("gpu"); the
    inputs are moved with ``.gpu()`` for it, or ``device=`` is passed (sources, mixed)."""

    make: Callable[[Any, Data, str], tuple]
    kwargs: Callable[[Data, str], dict] = lambda data, device: {}


def _photos(images, data, dev):
    """The photos, on the device under test."""
    return (images if dev == "cpu" else images.gpu(),)


def _on_device(dev: str, placement: str) -> dict:
    """``device=placement`` when the case runs on the device, nothing on the host."""
    return {} if dev == "cpu" else {"device": placement}


def _source(**kwargs):
    """A source operator: no inputs; an argument given as ``lambda data: ...`` takes its value from
    the data (``external_source``'s ``source`` is therefore wrapped in one)."""
    return Case(lambda images, data, dev: (),
                lambda data, dev: {**{k: (v(data) if callable(v) else v) for k, v in kwargs.items()},
                                   **_on_device(dev, dev)})


def _encoded_photos(images, data, dev):
    return (fn.readers.file(files=list(data.photo_files))[0],)


IMAGE_DECODER = Case(_encoded_photos, lambda data, dev: _on_device(dev, "mixed"))


def _photos_and_shifted_maps(images, data, dev):
    """The photos and remap's maps (mapx, mapy) moving each photo by 2.5 and 1.5 pixels."""
    grids = [np.mgrid[0:p.shape[0], 0:p.shape[1]].astype(np.float32) for p in data.photos]
    return (*_photos(images, data, dev),
            *_fixed([g[1] + 2.5 for g in grids], [g[0] - 1.5 for g in grids])(images, data, dev))


def _every_other_sample():
    return fn.external_source(source=lambda: [np.array(i % 2 == 0) for i in range(BATCH)])


def _split_photos(images, data, dev):
    return (*_photos(images, data, dev), _every_other_sample())


def _split_and_predicate(images, data, dev):
    """The two branches of the photos split by a predicate, and the predicate (a merge's inputs)."""
    predicate = _every_other_sample()
    true_part, false_part = add_op(conditional_ops.SPLIT, [_photos(images, data, dev)[0], predicate], {})
    return true_part, false_part, predicate


def _video_file(images, data, dev):
    return (fn.readers.file(files=[str(VIDEO)] * BATCH)[0],)


def _first_frames(data, dev):
    """Two frames of the video: decoding all of it would take most of this module's time."""
    return {"frames": [0, 1], **_on_device(dev, "mixed")}


def _no_inputs(images, data, dev):
    return ()


def _fixed(*batches: list[np.ndarray], layouts: tuple[str, ...] = ()):
    """Inputs made of fixed samples (one ``external_source`` per batch), on the device under test."""
    def make(images, data, dev):
        nodes = [fn.external_source(source=(lambda b: lambda: list(b))(b), layout=layout)
                 for b, layout in zip(batches, layouts or ("",) * len(batches))]
        return tuple(n if dev == "cpu" else n.gpu() for n in nodes)
    return make


def _with_photos(*batches: list[np.ndarray]):
    """The photos, then fixed samples."""
    return lambda images, data, dev: (*_photos(images, data, dev), *_fixed(*batches)(images, data, dev))


def _photos_and_their_mean(images, data, dev):
    """The photos and their per-channel mean (the inputs of variance and std_dev)."""
    photos = _photos(images, data, dev)[0]
    return photos, fn.reductions.mean(photos, axes=[0, 1])


def _encoded_jpegs(images, data, dev):
    """The photos' JPEG files as uint8 samples (inputs of operators that parse encoded images)."""
    return _fixed([np.fromfile(path, np.uint8) for path in data.photo_files])(images, data, dev)


def _file_names(images, data, dev):
    return _fixed([np.frombuffer(path.encode(), np.uint8) for path in data.photo_files])(images, data, dev)


def _translations(images, data, dev):
    """Two 2-D affine transforms (the inputs of transforms.combine)."""
    return fn.transforms.translation(offset=[1.0, 2.0]), fn.transforms.scale(scale=[2.0, 0.5])


def _npy_bytes(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def _lz4_block(data: bytes) -> bytes:
    import lz4.block

    return lz4.block.compress(data, store_size=False)


_rng = np.random.default_rng(0)
# Boxes [l, t, r, b] inside the unit square (one sample has none), their labels, and 2-D points.
BOXES = [np.concatenate([lt, lt + _rng.uniform(0.1, 0.4, lt.shape)], 1).astype(np.float32)
         for lt in (_rng.uniform(0, 0.5, (k, 2)) for k in (3, 0, 5))]
LABELS = [np.arange(1, len(b) + 1, dtype=np.int32) for b in BOXES]
POINTS = [_rng.uniform(0, 1, (k, 2)).astype(np.float32) for k in (4, 1, 6)]
ANCHORS = [0.0, 0.0, 0.5, 0.5, 0.5, 0.0, 1.0, 0.5, 0.0, 0.5, 0.5, 1.0, 0.5, 0.5, 1.0, 1.0]
# Sequences (F, H, W) of different lengths, and samples with unit axes (for squeeze).
SEQUENCES = [_rng.integers(0, 256, (f, 4, 6)).astype(np.uint8) for f in (4, 3, 5)]
UNIT_AXES = [np.full((1, k, 1), k, np.int32) for k in (2, 3, 1)]
FLOATS = [_rng.standard_normal((k, 5)).astype(np.float32) for k in (4, 3, 6)]
SCALARS = [np.array(v, np.float32) for v in (2.5, -1.0, 7.25)]
CLASS_INDICES = [np.array(v, np.int32) for v in (0, 3, 1)]
# Bayer mosaics (even H and W) and masks (for the mask pixel sampler).
MOSAICS = [_rng.integers(0, 256, (h, w)).astype(np.uint8) for h, w in ((8, 10), (6, 6), (12, 4))]
MASKS = [(_rng.uniform(0, 1, (h, w)) > 0.7).astype(np.uint8) for h, w in ((8, 10), (6, 6), (12, 4))]
IMAGE_SHAPES = [np.array(s, np.int64) for s in ([375, 500, 3], [500, 333, 3], [240, 320, 1])]
# Polygons (mask id, first vertex, end vertex), their vertices, and the mask ids to select.
POLYGONS = [np.array([[0, 0, 3], [1, 3, 7], [2, 7, 10]], np.int32), np.array([[5, 0, 4]], np.int32),
            np.array([[1, 0, 6], [0, 6, 9]], np.int32)]
VERTICES = [np.arange(20, dtype=np.float32).reshape(10, 2), np.ones((4, 2), np.float32),
            np.arange(18, dtype=np.float32).reshape(9, 2)]
MASK_IDS = [np.array(ids, np.int32) for ids in ([2, 0], [5], [0, 1])]
BLUR_KERNEL = [np.full((3, 3), 1 / 9, np.float32)] * BATCH
# .npy files and LZ4 blocks of small arrays, as bytes (the inputs of decoders.numpy and decoders.inflate).
NPY_BYTES = [np.frombuffer(_npy_bytes(f), np.uint8) for f in FLOATS]
LZ4_BLOCKS = [np.frombuffer(_lz4_block(s.tobytes()), np.uint8) for s in SEQUENCES[:1] * BATCH]
# Audio: 1-D signals of different lengths, as WAV files, and their (257, t) power spectrograms ("ft").
SIGNALS = [chirp(n) for n in (900, 640, 1200)]
WAVS = [wav_bytes(s, 16000) for s in SIGNALS]
SPECTRA = [np.abs(np.fft.rfft(s[:512 * (len(s) // 512)].reshape(-1, 512), axis=1)).T.astype(np.float32) ** 2
           for s in SIGNALS]


CASES: dict[str, Case] = {
    "_constant": Case(lambda images, data, dev: (), lambda data, dev: {"value": 3}),
    "_arithmetic": Case(lambda images, data, dev: _photos(images, data, dev) * 2, lambda data, dev: {"op": "add"}),
    "_subscript": Case(_photos, lambda data, dev: {"spec": (("slice", 1, 5, None), ("at", 2))}),
    "_to_device": Case(lambda images, data, dev: (images,)),
    "_to_host": Case(lambda images, data, dev: (images.gpu(),)),
    # jax_function takes dense batches: the photos cropped to one size.
    "_jax_function": Case(lambda images, data, dev: (fn.crop(_photos(images, data, dev)[0], crop=(40, 48)),),
                          lambda data, dev: {"function": lambda x: x * 2}),
    "_conditional.split": Case(_split_photos),
    "_conditional.merge": Case(_split_and_predicate),
    "reshape": Case(_photos, lambda data, dev: {"layout": "ABC"}),
    "resize": Case(_photos, lambda data, dev: {"resize_x": 40, "resize_y": 30}),
    "tensor_resize": Case(_photos, lambda data, dev: {"sizes": [30, 40], "axes": [0, 1]}),
    "experimental.resize": Case(_photos, lambda data, dev: {"resize_x": 40, "resize_y": 30}),
    "resize_crop_mirror": Case(_photos, lambda data, dev: {"resize_shorter": 40, "crop": [30, 35], "mirror": 1}),
    "fast_resize_crop_mirror": Case(_photos, lambda data, dev: {"size": [40, 50], "crop": [30, 35], "mirror": 2}),
    "warp_affine": Case(_photos, lambda data, dev: {"matrix": [0.9, 0.1, 2.0, -0.1, 1.1, 3.0], "size": [30, 40]}),
    "external_source": _source(source=lambda data: (lambda: list(data.photos)), layout="HWC"),
    "random.choice": Case(lambda images, data, dev: (fn.external_source(
        source=lambda: [np.arange(5, dtype=np.int32)] * BATCH),)),
    "readers.file": _source(files=lambda data: list(data.photo_files)),
    "readers.numpy": _source(files=lambda data: list(data.npy_files)),
    "readers.webdataset": _source(paths=lambda data: [data.tar], ext=["jpg", "cls"]),
    "readers.coco": _source(file_root=lambda data: data.coco_root,
                            annotations_file=lambda data: data.coco_annotations),
    "readers.video": _source(filenames=[str(VIDEO)], sequence_length=2),
    "readers.nemo_asr": _source(manifest_filepaths=lambda data: [data.nemo_manifest], read_idxs=True),
    "readers.video_resize": _source(filenames=[str(VIDEO)], sequence_length=2, size=[24, 32]),
    "experimental.readers.video": _source(filenames=[str(VIDEO)], sequence_length=2),
    "decoders.image": IMAGE_DECODER,
    "image_decoder": IMAGE_DECODER,
    "decoders.image_random_crop": IMAGE_DECODER,
    "image_decoder_random_crop": IMAGE_DECODER,
    "experimental.decoders.image": IMAGE_DECODER,
    "experimental.decoders.image_random_crop": IMAGE_DECODER,
    "decoders.video": Case(_video_file, _first_frames),
    "experimental.decoders.video": Case(_video_file, _first_frames),
    "readers.caffe": _source(path=lambda data: data.caffe_lmdb),
    "readers.caffe2": _source(path=lambda data: data.caffe2_lmdb),
    "readers.array_record": _source(path=lambda data: data.array_record),
    "readers.tfrecord": _source(path=lambda data: data.tfrecord, index_path=lambda data: data.tfrecord_index,
                                features={"image": tfrecord.FixedLenFeature([], tfrecord.string, ""),
                                          "label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1)}),
    # Operators added with the generic, image and detection families.
    "batch_permutation": Case(_no_inputs),
    "constant": Case(_no_inputs, lambda data, dev: {"fdata": [1.5, 2.0, -3.25], **_on_device(dev, dev)}),
    "zeros": Case(_no_inputs, lambda data, dev: {"shape": [2, 3]}),
    "ones": Case(_no_inputs, lambda data, dev: {"shape": [2, 3]}),
    "full": Case(_fixed(SCALARS), lambda data, dev: {"shape": [2, 3]}),
    "full_like": Case(_with_photos(SCALARS)),
    "cast_like": Case(lambda images, data, dev: (*_fixed(FLOATS)(images, data, dev), *_photos(images, data, dev))),
    "expand_dims": Case(_photos, lambda data, dev: {"axes": [0], "new_axis_names": "F"}),
    "squeeze": Case(_fixed(UNIT_AXES, layouts=("ABC",)), lambda data, dev: {"axes": [0, 2]}),
    "element_extract": Case(_fixed(SEQUENCES, layouts=("FHW",)), lambda data, dev: {"element_map": [0, 2]}),
    "sequence_rearrange": Case(_fixed(SEQUENCES, layouts=("FHW",)), lambda data, dev: {"new_order": [2, 0, 0]}),
    "per_frame": Case(_fixed(SEQUENCES, layouts=("FHW",))),
    "get_property": Case(_photos, lambda data, dev: {"key": "layout"}),
    "permute_batch": Case(_photos, lambda data, dev: {"indices": [2, 0, 0]}),
    "reductions.variance": Case(_photos_and_their_mean, lambda data, dev: {"axes": [0, 1]}),
    "reductions.std_dev": Case(_photos_and_their_mean, lambda data, dev: {"axes": [0, 1]}),
    "one_hot": Case(_fixed(CLASS_INDICES), lambda data, dev: {"num_classes": 5}),
    "python_function": Case(_photos, lambda data, dev: {"function": lambda image: image[::-1].copy()}),
    "dl_tensor_python_function": Case(_photos, lambda data, dev: {"function": lambda capsules: capsules}),
    "io.file.read": Case(_file_names),
    "peek_image_shape": Case(_encoded_jpegs),
    "decoders.image_crop": Case(_encoded_photos, lambda data, dev: {"crop": (40, 48), **_on_device(dev, "mixed")}),
    "image_decoder_crop": Case(_encoded_photos, lambda data, dev: {"crop": (40, 48), **_on_device(dev, "mixed")}),
    "experimental.decoders.image_crop": Case(_encoded_photos, lambda data, dev: {"crop": (40, 48),
                                                                                 **_on_device(dev, "mixed")}),
    "decoders.image_slice": Case(_encoded_photos, lambda data, dev: {"rel_start": [0.1, 0.2], "rel_shape": [0.5, 0.5],
                                                                     **_on_device(dev, "mixed")}),
    "image_decoder_slice": Case(_encoded_photos, lambda data, dev: {"rel_start": [0.1, 0.2], "rel_shape": [0.5, 0.5],
                                                                    **_on_device(dev, "mixed")}),
    "experimental.decoders.image_slice": Case(_encoded_photos, lambda data, dev: {
        "rel_start": [0.1, 0.2], "rel_shape": [0.5, 0.5], **_on_device(dev, "mixed")}),
    "clahe": Case(_photos, lambda data, dev: {"tiles_x": 4, "tiles_y": 4, "clip_limit": 2.0}),
    "color_space_conversion": Case(_photos, lambda data, dev: {"image_type": types.RGB, "output_type": types.YCbCr}),
    "debayer": Case(_fixed(MOSAICS, layouts=("HW",)), lambda data, dev: {"blue_position": [0, 0]}),
    "experimental.debayer": Case(_fixed(MOSAICS, layouts=("HW",)), lambda data, dev: {"blue_position": [0, 0]}),
    "filter": Case(_with_photos(BLUR_KERNEL)),
    "experimental.filter": Case(_with_photos(BLUR_KERNEL)),
    "gaussian_blur": Case(_photos, lambda data, dev: {"sigma": 1.5}),
    "paste": Case(_photos, lambda data, dev: {"ratio": 1.5, "fill_value": [0.0, 64.0, 128.0]}),
    "multi_paste": Case(_photos, lambda data, dev: {"in_ids": [2, 0], "output_size": [128, 128]}),
    "experimental.warp_perspective": Case(_photos, lambda data, dev: {"matrix": [1.0, 0.1, 2.0, -0.1, 1.0, 3.0,
                                                                                 0.0, 0.001, 1.0]}),
    "experimental.remap": Case(_photos_and_shifted_maps),
    "bb_flip": Case(_fixed(BOXES)),
    "bbox_paste": Case(_fixed(BOXES), lambda data, dev: {"ratio": 2.0}),
    "bbox_rotate": Case(_fixed(BOXES), lambda data, dev: {"angle": 30.0, "input_shape": [100, 200]}),
    "box_encoder": Case(_fixed(BOXES, LABELS), lambda data, dev: {"anchors": ANCHORS}),
    "coord_flip": Case(_fixed(POINTS)),
    "coord_transform": Case(_fixed(POINTS), lambda data, dev: {"M": [1.5, 2.0, 3.0, -4.0], "T": [0.5, 1.0]}),
    "random_bbox_crop": Case(_fixed(BOXES, LABELS)),
    "ssd_random_crop": Case(lambda images, data, dev: (images,) + _fixed(BOXES, LABELS)(images, data, dev)),
    "random_crop_generator": Case(_fixed(IMAGE_SHAPES)),
    "roi_random_crop": Case(_no_inputs, lambda data, dev: {"crop_shape": [10, 10], "roi_start": [5, 5],
                                                           "roi_end": [30, 30], "in_shape": [40, 40]}),
    "segmentation.random_object_bbox": Case(_fixed(MASKS, layouts=("HW",)), lambda data, dev: {"output_class": True}),
    "segmentation.random_mask_pixel": Case(_fixed(MASKS, layouts=("HW",)), lambda data, dev: {"foreground": 1}),
    "segmentation.select_masks": Case(_fixed(MASK_IDS, POLYGONS, VERTICES)),
    "transforms.combine": Case(_translations),
    "transforms.crop": Case(_no_inputs, lambda data, dev: {"from_start": [1.0, 2.0], "from_end": [5.0, 4.0]}),
    "transforms.rotation": Case(_no_inputs, lambda data, dev: {"angle": 30.0, "center": [1.0, 2.0]}),
    "transforms.scale": Case(_no_inputs, lambda data, dev: {"scale": [2.0, 3.0]}),
    "transforms.shear": Case(_no_inputs, lambda data, dev: {"shear": [0.5, 0.25]}),
    "transforms.translation": Case(_no_inputs, lambda data, dev: {"offset": [1.5, -2.25]}),
    "readers.mxnet": _source(path=lambda data: [data.mxnet_rec], index_path=lambda data: [data.mxnet_idx]),
    "experimental.readers.fits": _source(files=lambda data: list(data.fits_files)),
    "experimental.inputs.video": _source(name="fed_video", sequence_length=2),
    "readers.sequence": _source(file_root=lambda data: data.frame_streams, sequence_length=2),
    "decoders.numpy": Case(_fixed(NPY_BYTES)),
    "decoders.inflate": Case(_fixed(LZ4_BLOCKS), lambda data, dev: {"shape": list(SEQUENCES[0].shape)}),
    "decoders.audio": Case(_fixed(WAVS), lambda data, dev: {"sample_rate": 8000.0}),
    "audio_decoder": Case(_fixed(WAVS)),
    "audio_resample": Case(_fixed(SIGNALS), lambda data, dev: {"scale": 1.5}),
    "preemphasis_filter": Case(_fixed(SIGNALS)),
    "power_spectrum": Case(_fixed(SIGNALS), lambda data, dev: {"nfft": 256}),
    "spectrogram": Case(_fixed(SIGNALS), lambda data, dev: {"window_length": 128, "window_step": 64}),
    "mel_filter_bank": Case(_fixed(SPECTRA, layouts=("ft",)), lambda data, dev: {"nfilter": 20,
                                                                                  "sample_rate": 16000.0}),
    "to_decibels": Case(_fixed(SPECTRA, layouts=("ft",))),
    "mfcc": Case(_fixed(SPECTRA, layouts=("ft",)), lambda data, dev: {"n_mfcc": 13}),
    "nonsilent_region": Case(_fixed(SIGNALS), lambda data, dev: {"window_length": 64, "cutoff_db": -20.0}),
}


def default_case(schema: OpSchema) -> Case:
    """The case built from the schema alone: the photos as the one input, the required arguments
    from ``REQUIRED_VALUES``."""
    missing = [a.name for a in schema.args if a.default is REQUIRED and a.name not in REQUIRED_VALUES]
    if schema.is_source or schema.min_inputs > 1 or schema.max_inputs < 1 or missing:
        pytest.fail(f"fn.{schema.name} cannot be built from its schema over a batch of photos "
                    f"(source={schema.is_source}, inputs {schema.min_inputs}..{schema.max_inputs}, required "
                    f"arguments without a value in REQUIRED_VALUES: {missing}); add an entry to CASES (or "
                    f"REQUIRED_VALUES) in {__file__}")
    required = {a.name: REQUIRED_VALUES[a.name] for a in schema.args if a.default is REQUIRED}
    return Case(_photos, lambda data, dev: required)


def operator_function(schema: OpSchema) -> Callable:
    """``fn.<name>`` for public operators; the graph's own entry for the internal ones (``a + b``...)."""
    if schema.name.startswith("_"):
        return lambda *inputs, **kwargs: add_op(schema, inputs, kwargs)
    target: Any = fn
    for part in schema.name.split("."):
        target = getattr(target, part)
    return target


def build_pipeline(schema: OpSchema, data: Data, device: str = "cpu", **extra) -> Any:
    """A checkpointing pipeline whose outputs are every output of the operator under test."""
    case = CASES.get(schema.name) or default_case(schema)
    function = operator_function(schema)

    @pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=5, enable_checkpointing=True,
                  exec_pipelined=False)
    def pipe():
        images = fn.external_source(source=lambda: list(data.photos), layout="HWC")
        out = function(*case.make(images, data, device), **{**case.kwargs(data, device), **extra})
        if isinstance(out, dict):
            out = tuple(out.values())
        return tuple(out) if isinstance(out, (list, tuple)) else out

    return pipe()


#: Data fed with ``feed_input`` before running, for operators that take nothing else (by the operator's name).
FEEDS: dict[str, Callable[[], dict[str, list]]] = {
    "experimental.inputs.video": lambda: {"fed_video": [np.fromfile(VIDEO, np.uint8)]},
}


def build_and_feed(schema: OpSchema, data: Data, device: str = "cpu") -> Any:
    """``build_pipeline``, built, with the ``FEEDS`` of the operator fed."""
    p = build_pipeline(schema, data, device)
    p.build()
    for source, batch in FEEDS.get(schema.name, dict)().items():
        p.feed_input(source, batch)
    return p


def run_once(schema: OpSchema, data: Data, device: str = "cpu") -> tuple[list[list[np.ndarray]], Any]:
    """One batch of the operator's outputs as NumPy samples, and the pipeline (closed)."""
    p = None
    try:
        p = build_and_feed(schema, data, device)
        outs = p.run()
    except Exception as e:
        if schema.name not in CASES:
            pytest.fail(f"fn.{schema.name} does not run on a batch of uint8 HWC photos from its schema alone "
                        f"({type(e).__name__}: {e}); add an entry to CASES in {__file__}")
        raise
    finally:
        if p is not None:
            p.close()
    return [[np.asarray(o.as_cpu().at(i)) for i in range(len(o))] for o in outs], p


OPERATORS = sorted(registry())


def test_every_registered_operator_is_covered():
    """The table is read from the registry, so operators added later are in it too."""
    assert len(OPERATORS) >= 40
    assert not set(CASES) - set(OPERATORS), "CASES names operators that are not registered"


def test_an_operator_without_a_way_to_build_it_asks_for_an_entry():
    two_inputs = OpSchema(name="contract_probe", impl=Operator, doc="Adds two batches.", min_inputs=2, max_inputs=2)
    with pytest.raises(pytest.fail.Exception, match="fn.contract_probe cannot be built .* add an entry to CASES"):
        default_case(two_inputs)


@pytest.mark.parametrize("name", OPERATORS)
def test_schema_and_docstring(name):
    schema = registry()[name]
    assert schema.name == name
    assert isinstance(schema.impl, type) and issubclass(schema.impl, Operator), schema.impl
    assert schema.doc.strip(), f"fn.{name} has no doc"
    assert set(schema.devices) <= {"cpu", "gpu", "mixed"} and schema.devices
    assert 0 <= schema.min_inputs <= schema.max_inputs
    undocumented = [a.name for a in schema.all_args if not a.doc.strip()]
    assert not undocumented, f"fn.{name}: arguments without a doc line: {undocumented}"
    if not name.startswith("_") and name != "external_source":
        function = operator_function(schema)
        assert function.__doc__ == schema.docstring()
        for arg in schema.all_args:
            assert arg.name in function.__doc__


def _build_error(schema: OpSchema, data: Data, **extra) -> Exception:
    """The error of defining and building the pipeline (argument errors come from the definition)."""
    with pytest.raises(Exception) as info:
        p = build_pipeline(schema, data, **extra)
        try:
            p.build()
        finally:
            p.close()
    return info.value


@pytest.mark.parametrize("name", OPERATORS)
def test_an_unknown_argument_is_named(name, data):
    error = _build_error(registry()[name], data, **{UNKNOWN_ARGUMENT: 1})
    assert f"fn.{name}" in str(error) and UNKNOWN_ARGUMENT in str(error), repr(error)


# A value of the wrong type for each kind of argument.
WRONG_VALUES = {"int": "seven", "float": "seven", "bool": "seven", "ints": ["seven"], "floats": ["seven"],
                "str": 7, "strs": [7], "dtype": object(), "image_type": "seven", "interp_type": "seven",
                "callable": 7}


@pytest.mark.parametrize("name", OPERATORS)
def test_a_wrongly_typed_argument_is_named(name, data):
    schema = registry()[name]
    # The operator's own first typed argument; every operator has the common "seed" otherwise.
    arg = next((a for a in schema.args if a.kind in WRONG_VALUES), schema.arg_map["seed"])
    error = _build_error(schema, data, **{arg.name: WRONG_VALUES[arg.kind]})
    assert f"fn.{name}" in str(error) and f"'{arg.name}'" in str(error), repr(error)


def _fingerprint(pipe) -> dict:
    return json.loads(pipe.checkpoint())["fingerprint"]


@pytest.mark.parametrize("name", OPERATORS)
def test_checkpoint_fingerprint_is_stable(name, data):
    schema = registry()[name]
    _, first = run_once(schema, data)
    fresh = build_and_feed(schema, data)
    try:
        before = _fingerprint(fresh)
        fresh.run()
        after = _fingerprint(fresh)
    finally:
        fresh.close()
    assert before == after, f"fn.{name}: the fingerprint changed after one batch"
    assert before == _fingerprint(first), f"fn.{name}: two builds of one pipeline have different fingerprints"
    assert any(t == name for t in before["op_types"].values()), before["op_types"]


def _agree(name: str, host: list[list[np.ndarray]], device: list[list[np.ndarray]]) -> None:
    assert len(host) == len(device), f"fn.{name}: {len(host)} host outputs, {len(device)} device outputs"
    for k, (h_out, d_out) in enumerate(zip(host, device)):
        for i, (h, d) in enumerate(zip(h_out, d_out)):
            assert h.shape == d.shape and h.dtype == d.dtype, (name, k, i, h.shape, d.shape, h.dtype, d.dtype)
            if np.issubdtype(h.dtype, np.floating):
                np.testing.assert_allclose(d, h, rtol=1e-4, atol=1e-3, err_msg=f"fn.{name} output {k} sample {i}")
            else:
                # Integer results of float arithmetic may round differently by one on the device.
                diff = np.abs(d.astype(np.int64) - h.astype(np.int64))
                assert diff.max(initial=0) <= 1, f"fn.{name} output {k} sample {i}: host and device differ by " \
                                                 f"{diff.max()}"


# Exemptions from exact dtype agreement, by design: the device holds data as JAX arrays, and with JAX's
# default jax_enable_x64=False 64-bit types are held as 32-bit (spec/dali_jax_plugin.md, A6;
# jaxdali.pipeline.device_stage.narrow_for_jax, which raises rather than wrap values that do not fit).
# These operators' host outputs are 64-bit for the case above (DALI's types: shapes -> int64, the sum of
# uint8 -> uint64); their device outputs must equal the host ones as narrowed, value for value.
NARROWED_ON_DEVICE = {
    "shapes": "int64 shapes (DALI's default dtype) are held as int32 on the device",
    "reductions.sum": "integer sums accumulate in 64 bits (DALI's type), held as 32-bit on the device",
}


@pytest.mark.parametrize("name", [n for n in OPERATORS if {"gpu", "mixed"} & set(registry()[n].devices)
                                  and "cpu" in registry()[n].devices])
def test_host_and_device_agree(name, data):
    schema = registry()[name]
    device = "gpu" if "gpu" in schema.devices else "mixed"
    host, _ = run_once(schema, data, "cpu")
    on_device, _ = run_once(schema, data, device)
    if name in NARROWED_ON_DEVICE and not jax.config.jax_enable_x64:
        assert any(h.dtype.itemsize == 8 for out in host for h in out), \
            f"fn.{name} has no 64-bit output any more: remove its NARROWED_ON_DEVICE entry"
        host = [[narrow_for_jax(h) for h in out] for out in host]
    _agree(name, host, on_device)


def test_device_narrowing_exemptions_name_registered_device_operators():
    for name in NARROWED_ON_DEVICE:
        assert name in OPERATORS and "gpu" in registry()[name].devices, name
