import { Command } from "@commander-js/extra-typings";
/** placeholder */
export function verifyCommand() {
  return new Command("verify").requiredOption("--vectors <dir>", "dir").option("--json").action((o) => {
    console.log(o);
  });
}
