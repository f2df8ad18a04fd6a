/** The floor with one call per request to the key's object, a method that does nothing (bench/peers/floor.ts). */
import { floorWorker } from "../floor.ts";

export { FloorObject } from "../floor.ts";
export { CatalogueBuilder } from "../shared.ts";
export default floorWorker("noop");
