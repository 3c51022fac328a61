"""DALI's ResNet-50 training and validation pipelines, ported by changing only the import.

The pipeline below is written exactly as for NVIDIA DALI (its ImageNet ResNet-50 examples): a
file reader, a random-area crop fused with decoding, resize, and crop-mirror-normalise with a
random flip for training; decode, resize of the shorter side and a centre crop for validation.
Only the first import differs (``from nvidia.dali import ...`` -> ``from jaxdali import ...``).
``device_id=0`` is JAX's first device (the CPU on a CPU-only machine); ``dali_cpu=True`` keeps the
decoding on the host as DALI's ``--dali_cpu`` flag does.

Run: python examples/resnet50_pipelines.py DIR [--crop 224] [--batch-size 64]
"""

import argparse
import os

from jaxdali import fn, pipeline_def, types  # was: from nvidia.dali import fn, pipeline_def, types


@pipeline_def
def create_dali_pipeline(data_dir, crop, size, shard_id, num_shards, dali_cpu=False, is_training=True):
    images, labels = fn.readers.file(file_root=data_dir, shard_id=shard_id, num_shards=num_shards,
                                     random_shuffle=is_training, pad_last_batch=True, name="Reader")
    dali_device = "cpu" if dali_cpu else "gpu"
    decoder_device = "cpu" if dali_cpu else "mixed"
    if is_training:
        images = fn.decoders.image_random_crop(images, device=decoder_device, output_type=types.RGB,
                                               random_aspect_ratio=[0.8, 1.25], random_area=[0.1, 1.0],
                                               num_attempts=100)
        images = fn.resize(images, device=dali_device, resize_x=crop, resize_y=crop,
                           interp_type=types.INTERP_TRIANGULAR)
        mirror = fn.random.coin_flip(probability=0.5)
    else:
        images = fn.decoders.image(images, device=decoder_device, output_type=types.RGB)
        images = fn.resize(images, device=dali_device, size=size, mode="not_smaller",
                           interp_type=types.INTERP_TRIANGULAR)
        mirror = False
    images = fn.crop_mirror_normalize(images.gpu(), dtype=types.FLOAT, output_layout="CHW", crop=(crop, crop),
                                      mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                      std=[0.229 * 255, 0.224 * 255, 0.225 * 255], mirror=mirror)
    return images, labels.gpu()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", help="ImageNet-style folder (one sub-folder per class)")
    parser.add_argument("--crop", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=2)
    args = parser.parse_args()
    for is_training in (True, False):
        pipe = create_dali_pipeline(batch_size=args.batch_size, num_threads=os.cpu_count(), device_id=0, seed=12,
                                    data_dir=args.data_dir, crop=args.crop, size=args.crop * 8 // 7, dali_cpu=True,
                                    shard_id=0, num_shards=1, is_training=is_training)
        pipe.build()
        for i in range(args.batches):
            images, labels = pipe.run()
            array = images.as_cpu().as_array()
            print(f"{'train' if is_training else 'val'} batch {i}: images {array.shape} {array.dtype}, "
                  f"mean {array.mean():+.3f}, labels {labels.as_cpu().as_array().ravel()[:8].tolist()}")
        pipe.close()


if __name__ == "__main__":
    main()
