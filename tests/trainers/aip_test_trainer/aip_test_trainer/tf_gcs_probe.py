"""TensorFlow's own ``gs://`` file system, as a Keras trainer saves a model: write, list, read.

No emulator variable reaches TensorFlow's file system (its endpoints are fixed); only the job's
proxy, CA bundle and metadata server do. The report goes to ``<job-dir>/tf_gcs.json`` through
``tf.io.gfile`` itself.
"""

from __future__ import annotations

import json

from aip_test_trainer.common import parser


def main() -> None:
    import tensorflow as tf

    known, _ = parser().parse_known_args()
    target = known.job_dir.rstrip("/") + "/tf"
    with tf.io.gfile.GFile(f"{target}/written.txt", "w") as out:
        out.write("written by tf.io.gfile")
    report = {
        "version": tf.__version__,
        "listed": sorted(tf.io.gfile.listdir(target)),
        "read": tf.io.gfile.GFile(f"{target}/written.txt").read(),
    }
    with tf.io.gfile.GFile(known.job_dir.rstrip("/") + "/tf_gcs.json", "w") as out:
        out.write(json.dumps(report))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
