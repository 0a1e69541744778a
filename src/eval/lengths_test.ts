import { assertEquals, assertThrows } from "./_assert.ts";
import { parseLengths } from "./lengths.ts";

Deno.test("parseLengths() expands ranges and lists, sorted and without repeats", () => {
  assertEquals(parseLengths("1-4"), [1, 2, 3, 4]);
  assertEquals(parseLengths("48"), [48]);
  assertEquals(parseLengths("8, 1-3,2,16"), [1, 2, 3, 8, 16]);
});

Deno.test("parseLengths() rejects 0, backwards ranges, junk and huge lengths, naming the item", () => {
  assertThrows(() => parseLengths("0-5"), RangeError, `"0-5" starts at 0`);
  assertThrows(() => parseLengths("9-3"), RangeError, `"9-3" runs backwards`);
  assertThrows(() => parseLengths("1-x"), RangeError, `"1-x" is not N or A-B`);
  assertThrows(() => parseLengths(""), RangeError, `"" is not N or A-B`);
  assertThrows(() => parseLengths("1-5000"), RangeError, "goes past 4096");
});
