#!/usr/bin/env python3
"""Writes the seed corpus of coordinator_fuzz (corpus/coordinator_fuzz/): scripted sessions in the
fuzzer's record format ([op][session][length, 2 bytes LE][message]), messages encoded from text format by
`protoc --encode`. Run from anywhere: python3 tests/fuzz/make_coordinator_seeds.py"""
import os
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROTO = "memcoord/v1/coordinator.proto"
OPS = {"worker": 0, "end": 1, "cluster": 2, "trim": 3, "quota": 4, "put": 5, "get": 6, "plan": 7, "watch": 8}


def encode(message_type, text):
    return subprocess.run(["protoc", "--encode=memcoord.v1." + message_type, "-I", os.path.join(ROOT, "proto"),
                           PROTO], input=text.encode(), capture_output=True, check=True).stdout


def record(op, session, message_type=None, text=""):
    payload = encode(message_type, text) if message_type else b""
    return bytes([OPS[op], session]) + struct.pack("<H", len(payload)) + payload


def register(rank, world=2, group="g", host="h", extra=""):
    return record("worker", rank, "WorkerMessage",
                  f'register {{ rank: {rank} world_size: {world} host: "{host}" device: 0 group: "{group}" '
                  f'report_interval_ms: 100 device_total_bytes: 80000000000 '
                  f'pools {{ name: "default" allocated_bytes: 1000 reserved_bytes: 4000 limit_bytes: 8000 }} {extra} }}')


def report(session, step, allocated=1000, limit=8000, at_end="true"):
    return record("worker", session, "WorkerMessage",
                  f'report {{ step: {step} at_step_end: {at_end} device_free_bytes: 1000000 '
                  f'pools {{ name: "default" allocated_bytes: {allocated} reserved_bytes: 4000 limit_bytes: {limit} '
                  f'tags {{ tag: "activations" live_bytes: {allocated} live_blocks: 3 }} }} }}')


SEEDS = {
    "register_report_trim": [register(0), register(1), report(0, 1), report(1, 1), record("trim", 0, "TrimRequest",
                             'target_bytes: 0 group: "g"'), record("worker", 0, "WorkerMessage",
                             'ack { command_id: 1 code: 0 step: 3 released_bytes: 4000 }'), record("cluster", 0)],
    "trim_now_pool": [register(0, world=1), record("trim", 0, "TrimRequest", 'now: true pool: "default"')],
    "quota_and_oom": [register(0), register(1), record("quota", 0, "SetQuotaRequest",
                      'rank: 0 pool: "default" limit_bytes: 6000'), record("quota", 0, "SetQuotaRequest",
                      'rank: 1 limit_bytes: 16000'), record("worker", 1, "WorkerMessage",
                      'oom { request_id: 7 pool: "default" requested_bytes: 9000 limit_bytes: 8000 '
                      'reserved_bytes: 8000 allocated_bytes: 7000 }'), report(0, 2, allocated=7900)],
    "near_limit_rebalance": [register(0), register(1), report(0, 1, allocated=7600), report(1, 1, allocated=10)],
    "kv_bootstrap": [record("put", 0, "PutRequest", 'key: "nccl/id" value: "abc"'),
                     record("get", 0, "GetRequest", 'key: "nccl/id"'), record("get", 0, "GetRequest", 'key: "none"'),
                     record("put", 0, "PutRequest", 'key: "nccl/id" value: "def"')],
    "death_aborts_group": [register(0), register(1), register(2, world=3, group="other"), record("end", 128),
                           record("cluster", 0), register(0)],
    "protocol_errors": [report(0, 1), register(1), register(1), record("worker", 2, "WorkerMessage",
                        'register { rank: 5 world_size: 2 }'), record("end", 1)],
    "plan_live": [register(0), register(1, host="h2"), record("plan", 0, "PlanRequest",
                  'request_json: "{\\"models\\": [{\\"preset\\": \\"gpt2\\"}]}"')],
    "watch_while_joining": [record("watch", 0, "WatchRequest", "interval_ms: 50"), register(0),
                            record("watch", 0, "WatchRequest", "interval_ms: 0"), report(0, 1), record("end", 0),
                            record("watch", 0, "WatchRequest", "")],
}


def main():
    out = os.path.join(HERE, "corpus", "coordinator_fuzz")
    os.makedirs(out, exist_ok=True)
    for name, records in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(b"".join(records))
    print(f"wrote {len(SEEDS)} seeds to {out}")


if __name__ == "__main__":
    main()
