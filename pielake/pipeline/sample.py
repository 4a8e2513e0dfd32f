"""A realistic sample stream for the demo: cars reporting speed, acceleration and lateral acceleration at 1 Hz.

Each car cruises, sometimes speeds up hard into a speeding phase, and sometimes brakes hard while still fast, so
that the aggressive-driving pattern (TPStream Listing 1) occurs now and then, alongside near misses.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

SPEED_LIMIT_MPH = 70


def car_readings(car: str, seconds: int, rnd: random.Random) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    speed, t = rnd.uniform(45, 60), 0
    while t < seconds:
        phase = rnd.choices(["cruise", "aggressive", "brake"], weights=[6, 2, 1])[0]
        length = rnd.randint(8, 40)
        for step in range(length):
            if phase == "aggressive":
                accel = rnd.uniform(8.5, 11) if step < length // 3 else rnd.uniform(-1, 1)
                if step > 2 * length // 3:
                    accel = rnd.uniform(-12, -9.5)
            elif phase == "brake":
                accel = rnd.uniform(-11, -9.5) if step < 3 else rnd.uniform(-1, 1)
            else:
                accel = rnd.uniform(-1.5, 1.5)
            speed = min(110.0, max(0.0, speed + accel * 0.9))
            lateral = rnd.uniform(-0.8, 0.8) if rnd.random() < 0.1 else rnd.uniform(-0.3, 0.3)
            rows.append({"car_id": car, "ts": t, "speed": round(speed, 2), "accel": round(accel, 2),
                         "lateral_accel": round(lateral, 2)})
            t += 1
    return rows[:seconds]


def write_car_sensors(path: Path, cars: int = 6, seconds: int = 3600, seed: int = 7) -> int:
    """Write a CSV of `cars` cars over `seconds` seconds; returns the number of rows."""
    rnd = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [r for i in range(cars) for r in car_readings(f"car-{i + 1:02d}", seconds, rnd)]
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=["car_id", "ts", "speed", "accel", "lateral_accel"])
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)
