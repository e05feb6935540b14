#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Weights checksums of seven fixed-seed trainings (optimizers, augmentation, BatchNorm, residual and dense zoo models, 2 MPI
# ranks with sync-BN): a refactoring that keeps behaviour gives the same seven lines before and after.
#   tools/weights_checksums.sh BINDIR OUTFILE     (BINDIR holds dtnn, e.g. build/bin)
B=$1; OUT=$2; : > $OUT
run() { local name=$1; shift; "$B/dtnn" train --quiet --report /tmp/ck_$$.json "$@" >/dev/null 2>/tmp/ck_err_$$ || { echo "$name FAILED $(tail -2 /tmp/ck_err_$$)" >> $OUT; return; }
  python3 -c "import json,sys; r=json.load(open('/tmp/ck_$$.json')); print(sys.argv[1], r['weights_checksum'], r.get('test_accuracy'))" "$name" >> $OUT; }
run simplecnn_fm --model simplecnn --epochs 2 --steps-per-epoch 40 --train-samples 3000 --test-samples 500 --seed 3 --validation-split 0.1
run simplecnn_adam_aug --model simplecnn --epochs 1 --steps-per-epoch 30 --train-samples 2000 --test-samples 300 --optimizer adamw --lr 1e-3 --flip --crop-padding 2 --normalize --tiles 3
run resnet20_syn --model resnet20_cifar10 --dataset synthetic --synthetic-samples 256 --epochs 1 --steps-per-epoch 4 --batch-size 32 --tiles 2 --test-samples 64
run vgg11bn_syn --model vgg11bn_cifar10 --dataset synthetic --synthetic-samples 128 --epochs 1 --steps-per-epoch 3 --batch-size 16 --optimizer nadam --lr 1e-3 --test-samples 32
run densenet_syn --model densenet121_cifar10 --dataset synthetic --synthetic-samples 64 --epochs 1 --steps-per-epoch 2 --batch-size 8 --optimizer rmsprop --lr 1e-3 --test-samples 16 2>/dev/null
# data parallel
mpirun --allow-run-as-root --oversubscribe -np 2 -x OMPI_MCA_btl_vader_single_copy_mechanism=none "$B/dtnn" train --quiet --workers 1 --report /tmp/ckmpi_$$.json --model simplecnn --epochs 1 --steps-per-epoch 20 --train-samples 2000 --test-samples 200 --seed 1 --sync-bn >/dev/null 2>&1 && python3 -c "import json; r=json.load(open('/tmp/ckmpi_$$.json')); print('simplecnn_mpi2', r['weights_checksum'], r.get('test_accuracy'))" >> $OUT || echo "simplecnn_mpi2 FAILED" >> $OUT
mpirun --allow-run-as-root --oversubscribe -np 2 -x OMPI_MCA_btl_vader_single_copy_mechanism=none "$B/dtnn" train --quiet --workers 1 --report /tmp/ckmpi_$$.json --model resnet20_cifar10 --dataset synthetic --synthetic-samples 128 --epochs 1 --steps-per-epoch 3 --batch-size 16 --sync-bn --bucket-mb 1 --test-samples 32 >/dev/null 2>&1 && python3 -c "import json; r=json.load(open('/tmp/ckmpi_$$.json')); print('resnet20_mpi2_syncbn', r['weights_checksum'], r.get('test_accuracy'))" >> $OUT || echo "resnet20_mpi2 FAILED" >> $OUT
rm -f /tmp/ck_$$.json /tmp/ck_err_$$ /tmp/ckmpi_$$.json
cat $OUT
