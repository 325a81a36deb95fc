"""Points drawn into an image (explorer/raster.py) and the WebGL views' backdrop built from it
(explorer/deck_backdrop.py): known answers and brute-force checks."""

import io

import numpy as np
from PIL import Image

from explorer import deck_backdrop, deck_grid
from explorer.render import raster, style


def test_a_disc_holds_the_pixels_within_its_radius():
    assert sorted(map(tuple, raster.disc(0).tolist())) == [(0, 0)]
    assert len(raster.disc(1)) == 5 and len(raster.disc(1.5)) == 9 and len(raster.disc(2)) == 13
    d = raster.disc(2.5)
    assert all(dx * dx + dy * dy <= 6.25 for dx, dy in d) and len(d) == 21


def test_counts_agree_with_stamping_each_disc_by_hand():
    rng = np.random.default_rng(1)
    pix = rng.uniform(-3, 23, size=(300, 2))  # some fall outside the 20 x 12 image
    got = raster.counts(pix, 20, 12, 1.5)
    want = np.zeros((12, 20), dtype=np.int32)
    for x, y in np.floor(pix).astype(int):
        if not (0 <= x < 20 and 0 <= y < 12):
            continue  # a point outside draws nothing, even where its disc would reach in
        for dx, dy in raster.disc(1.5):
            if 0 <= x + dx < 20 and 0 <= y + dy < 12:
                want[y + dy, x + dx] += 1
    assert np.array_equal(got, want)
    assert raster.counts(np.array([[2.7, 0.2]]), 4, 2, 0)[0].tolist() == [0, 0, 1, 0]  # column 2, row 0


def test_overlapping_points_deepen_as_blending_would():
    a = 70 / 255
    one = np.array([[0, 1, 3]])
    rgba = raster.compose([((200, 0, 0), one)], a)
    assert rgba[0, 0].tolist() == [0, 0, 0, 0]  # nothing drawn: transparent
    assert rgba[0, 1].tolist() == [200, 0, 0, 70]
    assert rgba[0, 2, 3] == round(255 * (1 - (1 - a) ** 3))  # three discs: 1 - (1 - a)^3
    mixed = raster.compose([((200, 0, 0), np.array([[1]])), ((0, 0, 100), np.array([[3]]))], a)
    assert mixed[0, 0, :3].tolist() == [50, 0, 75]  # one red, three blue: their count-weighted mean


def test_png_round_trips():
    rgba = raster.compose([((10, 20, 30), raster.counts(np.array([[1, 1], [3, 2]]), 5, 4, 1))], 0.5)
    for colours in (0, 256):  # a few colours: the palette holds them exactly
        png = raster.png(rgba, colours)
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")), rgba)
    assert raster.data_url(png).startswith("data:image/png;base64,iVBORw0KGgo")


def test_a_palette_image_is_close_keeps_clear_pixels_clear_and_is_smaller():
    rng = np.random.default_rng(6)
    pix = rng.normal(150, 40, (40000, 2))
    rgba = raster.compose([((204, 121, 167), raster.counts(pix, 300, 300, 2)),
                           ((0, 114, 178), raster.counts(pix * 0.8 + 40, 300, 300, 2))], 70 / 255)
    full, palette = raster.png(rgba, 0), raster.png(rgba)
    back = np.asarray(Image.open(io.BytesIO(palette)).convert("RGBA")).astype(int)
    assert np.array_equal(back[..., 3] == 0, rgba[..., 3] == 0)  # nothing painted that was clear, or cleared
    assert np.abs(back - rgba).max() <= 32 and np.abs(back - rgba).mean() < 3
    assert len(palette) < 0.6 * len(full)


def _points(xy, matrix="T", ids=None) -> deck_grid.ViewPoints:
    rows = np.asarray(xy, dtype=np.int32).reshape(-1, 2)
    ids = np.arange(len(rows)) if ids is None else np.asarray(ids)
    packed = rows[:, 0].astype(np.int64) + deck_grid.BASE * rows[:, 1].astype(np.int64)
    return deck_grid.ViewPoints(matrix, ids, rows, packed.tolist())


def test_a_raster_puts_each_point_where_its_bounds_say():
    """A point's pixel, read back through the image's bounds, is within a pixel of the point."""
    p = _points([[100, 200], [900, 250], [500, 700]])
    k = 0.25  # image pixels a grid step
    r = deck_backdrop.raster([p], deck_grid.bounds_of([p]), k, 0)
    img = np.asarray(Image.open(io.BytesIO(raster_png(r))).convert("RGBA"))
    left, bottom, right, top = r.bounds
    assert (right - left) * k == img.shape[1] and (top - bottom) * k == img.shape[0]
    ys, xs = np.nonzero(img[..., 3])
    assert len(xs) == 3
    drawn = sorted(zip(left + (xs + 0.5) / k, top - (ys + 0.5) / k))
    for (gx, gy), (x, y) in zip(sorted(p.rows.tolist()), drawn):
        assert abs(gx - x) <= 1 / k and abs(gy - y) <= 1 / k
    assert img[ys[0], xs[0], :3].tolist() == deck_grid.rgba(style.PALETTE["T"])[:3]
    # a hole leaves the window empty and the rest as it was
    holed = raster_png(deck_backdrop.raster([p], deck_grid.bounds_of([p]), k, 0, hole=(400, 600, 600, 800)))
    holed = np.asarray(Image.open(io.BytesIO(holed)).convert("RGBA"))
    assert np.count_nonzero(holed[..., 3]) == 2


def raster_png(r: deck_backdrop.Raster) -> bytes:
    import base64

    return base64.b64decode(r.url.split(",", 1)[1])


def test_each_cell_names_the_token_nearest_its_centre():
    """Brute force: for every non-empty cell, the token the cell names is in it and no token in it
    is nearer its centre (a tie goes to the lowest id); every token's cell has a name."""
    rng = np.random.default_rng(2)
    xy = np.concatenate([rng.normal(500, 80, (400, 2)), rng.normal(1500, 30, (300, 2))]).clip(0)
    p = _points(np.rint(xy), ids=rng.permutation(1000)[:700])
    cell = 37
    hits = deck_backdrop.hit_cells(p, cell)
    named = {}
    for t, (x, y) in zip(hits.ids.tolist(), hits.rows.tolist()):
        named[(x // cell, y // cell)] = t
    assert len(named) == len(hits.ids)  # one per cell
    for key in {(x // cell, y // cell) for x, y in p.rows.tolist()}:
        inside = [(float(np.hypot(x - (key[0] + 0.5) * cell, y - (key[1] + 0.5) * cell)), int(t))
                  for t, (x, y) in zip(p.ids, p.rows.tolist()) if (x // cell, y // cell) == key]
        assert named[key] == min(inside)[1]
    assert hits.data == [int(x) + deck_grid.BASE * int(y) for x, y in hits.rows.tolist()]
    # only inside a box
    box = (400, 400, 600, 600)
    inner = deck_backdrop.hit_cells(p, cell, box)
    assert all(400 <= x <= 600 and 400 <= y <= 600 for x, y in inner.rows.tolist()) and len(inner.ids) > 0


def test_a_point_in_its_own_cell_is_picked_exactly():
    """Cells of one grid step name every token (the lowest id where several share a position)."""
    p = _points([[3, 4], [10, 4], [3, 4], [7, 7]], ids=[5, 6, 2, 9])
    hits = deck_backdrop.hit_cells(p, 1)
    assert sorted(hits.ids.tolist()) == [2, 6, 9]
    assert [deck_backdrop.token_at(p, d) for d in hits.data] == hits.ids.tolist()


def test_a_centred_backdrop_adds_a_sharper_window_and_finer_cells():
    rng = np.random.default_rng(3)
    xy = np.rint(rng.uniform(0, 30000, (20000, 2)))
    pts = {m: _points(xy, m) for m in "ITO"}
    whole = deck_backdrop.backdrop(pts, ["T"])
    assert len(whole.rasters) == 1 and list(whole.hits) == ["points-T"]
    centre = pts["T"].rows[0]
    near = deck_backdrop.backdrop(pts, ["T"], centre)
    assert len(near.rasters) == 2 and list(near.hits) == ["points-T", "near-T"]
    (_, c1), (fine, c2) = near.hits["points-T"], near.hits["near-T"]
    _, zoom = deck_grid.fit(deck_grid.bounds_of([pts["T"]]), deck_grid.VIEW_WIDTH_PX, 420)
    box = deck_backdrop.focus_box(centre, zoom, deck_grid.VIEW_WIDTH_PX, 420)
    assert near.rasters[1].bounds[0] <= box[0] and near.rasters[1].bounds[2] >= box[2]
    # the window is 8x closer: its image has 2 ** FOCUS_ZOOM times the whole map's pixels a step
    w0 = (whole.rasters[0].bounds[2] - whole.rasters[0].bounds[0])
    assert (near.rasters[1].bounds[2] - near.rasters[1].bounds[0]) < w0 / 2
    # cells of HIT_PX screen pixels at either zoom: 8x finer in the window (a sparse one: under the cap)
    assert c1 == round(deck_backdrop.HIT_PX / 2 ** zoom) and c2 == round(deck_backdrop.HIT_PX / 2 ** (zoom + deck_backdrop.FOCUS_ZOOM))
    assert 0 < len(fine.ids) <= deck_backdrop.HIT_CAP
    assert all(box[0] <= x <= box[2] and box[1] <= y <= box[3] for x, y in fine.rows.tolist())


def test_cells_of_a_dense_window_are_coarsened_to_the_cap():
    xy = np.rint(np.random.default_rng(4).normal(15000, 40, (30000, 2)))  # every point near the centre
    pts = {m: _points(xy, m) for m in "ITO"}
    back = deck_backdrop.backdrop(pts, ["I", "T", "O"], np.array([15000, 15000]), width_px=900)
    assert sum(len(v[0].ids) for k, v in back.hits.items() if k.startswith(deck_backdrop.NEAR_LAYER)) <= deck_backdrop.HIT_CAP


def test_overlaid_matrices_share_their_cells_the_nearest_token_naming_each():
    """Brute force over three matrices' points in one view: every non-empty cell of the union is
    named once, by the token (of any matrix) nearest its centre, the earlier matrix on a tie."""
    rng = np.random.default_rng(5)
    cell = 50
    pts = [_points(np.rint(rng.normal(1000, 150, (500, 2))).clip(0), m) for m in "ITO"]
    shared = deck_backdrop.one_per_cell([deck_backdrop.hit_cells(p, cell) for p in pts], cell)
    named = [(m, int(t), (x // cell, y // cell)) for m, c in shared.items() for t, (x, y) in zip(c.ids, c.rows.tolist())]
    assert len({key for _, _, key in named}) == len(named)  # one name a cell
    union = {(x // cell, y // cell) for p in pts for x, y in p.rows.tolist()}
    assert {key for _, _, key in named} == union
    best = {}
    for i, p in enumerate(pts):
        for t, (x, y) in zip(p.ids.tolist(), p.rows.tolist()):
            key = (x // cell, y // cell)
            d = (x - (key[0] + 0.5) * cell) ** 2 + (y - (key[1] + 0.5) * cell) ** 2
            best[key] = min(best.get(key, (np.inf,)), (d, i, t))
    assert {key: (m, t) for m, t, key in named} == {key: ("ITO"[i], t) for key, (_, i, t) in best.items()}
    assert list(shared) == ["I", "T", "O"] and deck_backdrop.one_per_cell(pts[:1], cell)["I"] is pts[0]
