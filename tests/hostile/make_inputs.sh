#!/usr/bin/env bash
# The hostile-input suite's damaged files, made fresh in OUT:
#   checkpoints: a good one from a 1-step run, then copies with bad magic, random bytes, a cut
#                tensor, a flipped header byte, and one of another model width;
#   config files: an unknown field, a wrong type, binary junk;
#   idx:         Fashion-MNIST-named files with a zero dimension, a wrong magic number, cut short;
#   JPEG trees:  every file unreadable; a clean tree with a file that is a link to itself;
#   safetensors: the good checkpoint exported, then copies with a tensor missing, one extra, a wrong
#                shape or dtype, another class count, overlapping ranges, cut short, a bad length.
#   make_inputs.sh OUT DTRAIN_TRAIN DTRAIN_MAKE_IMAGE_TREE DTRAIN_EXPORT
set -euo pipefail
out=$1
train=$2
make_tree=$3
export_tool=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out"
mkdir -p "$out"/{ckpt,configs,idx_zero,idx_magic,idx_short,jpeg_all_bad/train/a,jpeg_all_bad/val/a}
cd "$out"

# Checkpoints.
"$train" --model small-resnet --blocks_per_stage 1 --width 4 --image_size 16 --synthetic_samples 16 \
  --batch_per_rank 8 --epochs 1 --max_total_steps 1 --checkpoint_dir ckpt > ckpt/run.log 2>&1
good=$(ls ckpt/*.dtrain)
cp "$good" good.dtrain
echo "not a checkpoint" > bad_magic.dtrain
head -c 4096 /dev/urandom > random_bytes.dtrain
head -c "$(( $(stat -c %s good.dtrain) - 100 ))" good.dtrain > cut_short.dtrain
cp good.dtrain flipped_header.dtrain
# One byte inside the header (past the 8-byte magic and the header length): the checksum refuses it.
byte=$(od -An -tu1 -j 24 -N 1 flipped_header.dtrain | tr -d ' ')
printf "$(printf '\\%03o' $(( byte ^ 1 )))" | dd of=flipped_header.dtrain bs=1 seek=24 conv=notrunc status=none
touch not_a_directory

# Config files.
printf 'epochs: 3\nbogus_field: 1\n' > configs/unknown_field.pbtxt
printf 'epochs: 3\nbatch_per_rank: "lots"\n' > configs/wrong_type.pbtxt
head -c 512 /dev/urandom > configs/binary_junk.pbtxt

# idx files (Fashion-MNIST's names; a header is a magic number and big-endian dimensions).
idx() {  # idx FILE MAGIC_HEX DIMS...
  local file=$1 magic=$2
  shift 2
  { printf "\\x00\\x00\\x08\\x$magic"
    for d in "$@"; do printf "\\x$(printf %02x $(( d >> 24 & 255 )))\\x$(printf %02x $(( d >> 16 & 255 )))\\x$(printf %02x $(( d >> 8 & 255 )))\\x$(printf %02x $(( d & 255 )))"; done
  } > "$file"
}
fmnist() {  # fmnist DIR: labels for 4 images, good t10k files
  idx "$1/train-labels-idx1-ubyte" 01 4; printf '\x00\x01\x02\x03' >> "$1/train-labels-idx1-ubyte"
  idx "$1/t10k-images-idx3-ubyte" 03 1 28 28; head -c 784 /dev/zero >> "$1/t10k-images-idx3-ubyte"
  idx "$1/t10k-labels-idx1-ubyte" 01 1; printf '\x00' >> "$1/t10k-labels-idx1-ubyte"
}
fmnist idx_zero; idx idx_zero/train-images-idx3-ubyte 03 4 0 28
fmnist idx_magic; idx idx_magic/train-images-idx3-ubyte 02 4 28 28; head -c 3136 /dev/zero >> idx_magic/train-images-idx3-ubyte
fmnist idx_short; idx idx_short/train-images-idx3-ubyte 03 4 28 28; head -c 1000 /dev/zero >> idx_short/train-images-idx3-ubyte
for d in idx_zero idx_magic idx_short; do gzip -f "$d"/*-ubyte; done

# JPEG trees.
for i in 1 2 3; do echo "not a jpeg" > "jpeg_all_bad/train/a/$i.JPEG"; done
echo "not a jpeg" > jpeg_all_bad/val/a/1.JPEG
"$make_tree" symlink_loop --clean > /dev/null
ln -s self.JPEG symlink_loop/train/class_a/self.JPEG  # a link to itself: stat fails with ELOOP
# safetensors files for --init-weights (tests/hostile/damage_safetensors.py).
"$export_tool" good.dtrain --format safetensors good.safetensors > /dev/null
python3 "$here/damage_safetensors.py" good.safetensors safetensors
echo "hostile inputs ready in $out"
